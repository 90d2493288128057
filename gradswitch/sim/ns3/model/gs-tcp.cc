#include "gs-tcp.h"

#include "gs-header.h"
#include "gs-keys.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint16_t kServerPort = 5299;      // gradswitch/protocol/background_tcp.py BACKGROUND_PORT (the testbed's iperf3 server)
constexpr uint16_t kClientPortBase = 40000; // gradswitch/protocol/background_tcp.py CLIENT_PORT_BASE (flow f: base + f)

double
NowS()
{
    return Simulator::Now().GetSeconds();
}

} // namespace

class TcpBackground::SenderEndpoint : public HostEndpoint
{
  public:
    explicit SenderEndpoint(TcpBackground* bg)
        : m_bg(bg)
    {
    }

    void Receive(const Wire& w) override
    {
        uint32_t f = w.dport - kClientPortBase;
        if (f >= m_bg->m_flows.size())
        {
            return;
        }
        OnAck(f, w.aux);
        m_bg->m_sender->ActivateEndpoint(this);
    }

    bool NextPacket(Ptr<Packet>& p, uint32_t& wire) override
    {
        size_t n = m_bg->m_flows.size();
        for (size_t k = 0; k < n; k++)
        {
            size_t f = (m_rr + k) % n;
            int64_t seg = Sendable(f);
            if (seg >= 0)
            {
                m_rr = (f + 1) % n;
                p = Segment(f, static_cast<uint64_t>(seg), wire);
                return true;
            }
        }
        return false;
    }

    void Timer(uint32_t f)
    {
        Flow& fl = m_bg->m_flows[f];
        m_armed[f] = false;
        if (fl.timerStart < 0 || fl.una >= fl.highest)
        {
            return;
        }
        int64_t deadline = fl.timerStart + static_cast<int64_t>(fl.rto * 1e12);
        int64_t now = NowTicks();
        if (now < deadline)
        {
            Arm(f, deadline);
            return;
        }
        // timeout: back to the first unacknowledged segment, one segment of window
        double flight = static_cast<double>(fl.highest - fl.una);
        fl.ssthresh = std::max(flight / 2, 2.0);
        fl.cwnd = 1;
        fl.next = fl.una;
        fl.recovery = false;
        fl.dupacks = 0;
        fl.resend.clear();
        fl.timedSeg = -1;
        fl.rto = std::min(fl.rto * 2, 60.0);
        fl.timerStart = now;
        Arm(f, now + static_cast<int64_t>(fl.rto * 1e12));
        m_bg->m_sender->ActivateEndpoint(this);
    }

    std::vector<bool> m_armed;

  private:
    uint64_t Window(const Flow& fl) const
    {
        double rwnd = static_cast<double>(m_bg->m_spec.rwndBytes) / m_bg->m_spec.mss;
        return static_cast<uint64_t>(std::max(1.0, std::min(fl.cwnd, rwnd)));
    }

    int64_t Sendable(size_t f)
    {
        Flow& fl = m_bg->m_flows[f];
        while (!fl.resend.empty())
        {
            uint64_t seg = fl.resend.back();
            fl.resend.pop_back();
            if (seg >= fl.una && seg < fl.highest)
            {
                fl.retransmissions++;
                return static_cast<int64_t>(seg);
            }
        }
        if (fl.next - fl.una < Window(fl))
        {
            uint64_t seg = fl.next++;
            if (seg < fl.highest)
            {
                fl.retransmissions++;
            }
            else
            {
                fl.highest = seg + 1;
                if (fl.timedSeg < 0)
                {
                    fl.timedSeg = static_cast<int64_t>(seg);
                    fl.timedAt = NowTicks();
                }
            }
            return static_cast<int64_t>(seg);
        }
        return -1;
    }

    Ptr<Packet> Segment(size_t f, uint64_t seg, uint32_t& wire)
    {
        Flow& fl = m_bg->m_flows[f];
        GsHeader h;
        h.w.kind = KIND_TCP;
        h.w.src = m_bg->m_sender->Index();
        h.w.dst = m_bg->m_receiver->Index();
        h.w.sport = fl.sport;
        h.w.dport = kServerPort;
        h.w.psn = static_cast<uint32_t>(seg);
        h.w.payload = m_bg->m_spec.mss;
        h.w.wire = m_bg->m_spec.mss + m_bg->m_wire.tcpOverhead;
        wire = h.w.wire;
        Ptr<Packet> p = Create<Packet>();
        p->AddHeader(h);
        if (fl.timerStart < 0)
        {
            fl.timerStart = NowTicks();
            Arm(static_cast<uint32_t>(f), fl.timerStart + static_cast<int64_t>(fl.rto * 1e12));
        }
        return p;
    }

    void Arm(uint32_t f, int64_t at)
    {
        if (m_armed[f])
        {
            return;
        }
        m_armed[f] = true;
        Simulator::Schedule(TimeStep(std::max<int64_t>(0, at - NowTicks())), &SenderEndpoint::Timer,
                            this, f);
    }

    void OnAck(uint32_t f, uint64_t ack)
    {
        Flow& fl = m_bg->m_flows[f];
        int64_t now = NowTicks();
        if (ack > fl.una)
        {
            uint64_t newly = ack - fl.una;
            fl.una = ack;
            if (fl.timedSeg >= 0 && ack > static_cast<uint64_t>(fl.timedSeg))
            {
                double rtt = TicksToSeconds(now - fl.timedAt);
                if (!fl.haveRtt)
                {
                    fl.srtt = rtt;
                    fl.rttvar = rtt / 2;
                    fl.haveRtt = true;
                }
                else
                {
                    fl.rttvar = 0.75 * fl.rttvar + 0.25 * std::abs(fl.srtt - rtt);
                    fl.srtt = 0.875 * fl.srtt + 0.125 * rtt;
                }
                fl.rto = std::max(m_bg->m_spec.minRtoS, fl.srtt + 4 * fl.rttvar);
                fl.timedSeg = -1;
            }
            if (fl.recovery)
            {
                if (ack >= fl.recover)
                {
                    fl.recovery = false;
                    fl.cwnd = fl.ssthresh;
                    fl.dupacks = 0;
                }
                else
                {
                    // NewReno partial ACK: the next hole now, the window deflated by what left
                    fl.resend.push_back(fl.una);
                    fl.cwnd = std::max(1.0, fl.cwnd - static_cast<double>(newly) + 1);
                }
            }
            else
            {
                fl.dupacks = 0;
                fl.cwnd += fl.cwnd < fl.ssthresh ? static_cast<double>(newly) : static_cast<double>(newly) / fl.cwnd;
            }
            fl.next = std::max(fl.next, fl.una);
            fl.timerStart = fl.una < fl.highest ? now : -1;
            return;
        }
        if (ack == fl.una && fl.una < fl.highest)
        {
            fl.dupacks++;
            if (!fl.recovery && fl.dupacks == 3)
            {
                fl.ssthresh = std::max(static_cast<double>(fl.highest - fl.una) / 2, 2.0);
                fl.cwnd = fl.ssthresh + 3;
                fl.recovery = true;
                fl.recover = fl.highest;
                fl.resend.push_back(fl.una);
            }
            else if (fl.recovery)
            {
                fl.cwnd += 1;
            }
        }
    }

    TcpBackground* m_bg;
    size_t m_rr = 0;
};

class TcpBackground::ReceiverEndpoint : public HostEndpoint
{
  public:
    explicit ReceiverEndpoint(TcpBackground* bg)
        : m_bg(bg)
    {
    }

    void Receive(const Wire& w) override
    {
        uint32_t f = w.sport - kClientPortBase;
        if (f >= m_bg->m_flows.size())
        {
            return;
        }
        Flow& fl = m_bg->m_flows[f];
        uint64_t seg = w.psn;
        if (seg == fl.expected)
        {
            fl.expected++;
            while (!fl.outOfOrder.empty() && *fl.outOfOrder.begin() == fl.expected)
            {
                fl.outOfOrder.erase(fl.outOfOrder.begin());
                fl.expected++;
            }
        }
        else if (seg > fl.expected)
        {
            fl.outOfOrder.insert(seg);
        }
        m_acks.emplace_back(f, fl.expected);
        m_bg->m_receiver->ActivateEndpoint(this);
    }

    bool NextPacket(Ptr<Packet>& p, uint32_t& wire) override
    {
        if (m_acks.empty())
        {
            return false;
        }
        auto [f, ack] = m_acks.front();
        m_acks.pop_front();
        GsHeader h;
        h.w.kind = KIND_TCP;
        h.w.flags = F_TCP_ACK;
        h.w.src = m_bg->m_receiver->Index();
        h.w.dst = m_bg->m_sender->Index();
        h.w.sport = kServerPort;
        h.w.dport = m_bg->m_flows[f].sport;
        h.w.aux = static_cast<uint32_t>(ack);
        h.w.wire = m_bg->m_wire.tcpOverhead;
        wire = h.w.wire;
        p = Create<Packet>();
        p->AddHeader(h);
        return true;
    }

  private:
    TcpBackground* m_bg;
    std::deque<std::pair<uint32_t, uint64_t>> m_acks;
};

TcpBackground::TcpBackground(const BackgroundSpec& spec, GsHost* sender, GsHost* receiver, const WireSizes& wire)
    : m_spec(spec),
      m_sender(sender),
      m_receiver(receiver),
      m_wire(wire)
{
    if (spec.flows == 0 || spec.mss == 0)
    {
        throw ConfigError("background: flows and mss must be at least 1");
    }
    m_flows.resize(spec.flows);
    for (uint32_t f = 0; f < spec.flows; f++)
    {
        m_flows[f].sport = static_cast<uint16_t>(kClientPortBase + f);
        m_flows[f].rto = 1.0; // RFC 6298's initial RTO
    }
    m_tx = std::make_unique<SenderEndpoint>(this);
    m_tx->m_armed.assign(spec.flows, false);
    m_rx = std::make_unique<ReceiverEndpoint>(this);
    m_sender->AddEndpoint(kServerPort, m_tx.get());   // ACKs come to the sender's client ports...
    for (uint32_t f = 0; f < spec.flows; f++)
    {
        m_sender->AddEndpoint(m_flows[f].sport, m_tx.get());
    }
    m_receiver->AddEndpoint(kServerPort, m_rx.get()); // ...segments to the server port
}

TcpBackground::~TcpBackground() = default;

void
TcpBackground::Start()
{
    m_startS = NowS();
    Simulator::ScheduleWithContext(m_sender->GetId(), Seconds(0), [this]() { m_sender->ActivateEndpoint(m_tx.get()); });
}

nlohmann::json
TcpBackground::Result(double simS) const
{
    uint64_t bytes = 0;
    uint64_t retransmissions = 0;
    for (const auto& f : m_flows)
    {
        bytes += f.expected * m_spec.mss;
        retransmissions += f.retransmissions;
    }
    double seconds = simS - m_startS;
    return {{res::background::kFlows, m_spec.flows},
            {res::background::kMss, m_spec.mss},
            {res::background::kBytes, bytes},
            {res::background::kSeconds, seconds},
            {res::background::kGoodputMbps, seconds > 0 ? static_cast<double>(bytes) * 8 / seconds / 1e6 : 0.0},
            {res::background::kRetransmissions, retransmissions},
            {res::background::kModel, "NewReno-like AIMD (gs-tcp.h), not ns-3's TCP"}};
}

} // namespace gs
} // namespace ns3
