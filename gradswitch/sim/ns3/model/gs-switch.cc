#include "gs-switch.h"

#include "gs-constants.h"
#include "gs-netreduce-switch.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <cmath>

namespace ns3
{
namespace gs
{

NS_OBJECT_ENSURE_REGISTERED(GsSwitch);

namespace
{

uint64_t
MemberKey(uint32_t port, uint32_t src, uint32_t job, uint32_t srcNode)
{
    return (static_cast<uint64_t>(port & 0xFFF) << 52) | (static_cast<uint64_t>(src & 0xFFFFF) << 32) |
           (static_cast<uint64_t>(job & 0xFFF) << 20) | (srcNode & 0xFFFFF);
}

struct Crc16Table
{
    uint16_t t[256];

    Crc16Table()
    {
        // CRC-16/ARC: polynomial 0x8005 reflected (0xA001), initial 0, no final XOR.
        for (uint32_t i = 0; i < 256; i++)
        {
            uint16_t c = static_cast<uint16_t>(i);
            for (int k = 0; k < 8; k++)
            {
                c = (c & 1) ? static_cast<uint16_t>((c >> 1) ^ 0xA001) : static_cast<uint16_t>(c >> 1);
            }
            t[i] = c;
        }
    }
};

const Crc16Table kCrc16;

} // namespace

TypeId
GsSwitch::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::gs::GsSwitch").SetParent<Node>().SetGroupName("Gradswitch").AddConstructor<GsSwitch>();
    return tid;
}

GsSwitch::GsSwitch() = default;

GsSwitch::GsSwitch(uint32_t systemId)
    : Node(systemId)
{
}
GsSwitch::~GsSwitch() = default;

uint16_t
GsSwitch::Crc16(const uint8_t* data, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
    {
        crc = static_cast<uint16_t>((crc >> 8) ^ kCrc16.t[(crc ^ data[i]) & 0xFF]);
    }
    return crc;
}

void
GsSwitch::Setup(Settings s)
{
    m_s = std::move(s);
    m_delayTicks = SecondsToTicks(m_s.sw.processingDelayS);
    m_flowletGapTicks = SecondsToTicks(m_s.sw.flowletGapS);
    m_rng.seed(m_s.seed * 0x9E3779B97F4A7C15ULL + m_s.index);
    m_flowletTime.assign(FLOWLET_SLOTS, -1);
    m_flowletMember.assign(FLOWLET_SLOTS, 0);
}

void
GsSwitch::AddPort(uint32_t port, Ptr<GsDevice> dev)
{
    if (m_ports.size() <= port)
    {
        m_ports.resize(port + 1, nullptr);
        m_loss.resize(port + 1, 0.0);
        m_vqBytes.resize((port + 1) * kPriorities, 0.0);
        m_vqTime.resize((port + 1) * kPriorities, 0);
    }
    m_ports[port] = PeekPointer(dev);
    m_portMap[port] = dev;
}

void
GsSwitch::SetLossyPort(uint32_t port, double fraction)
{
    m_loss.at(port) = fraction;
}

void
GsSwitch::SetDlcp(uint32_t job, DlcpJobFeatures f)
{
    m_dlcp[job] = f;
}

NrSwitchJob*
GsSwitch::AddNetReduceJob(std::unique_ptr<NrSwitchJob> job)
{
    m_nr.push_back(std::move(job));
    return m_nr.back().get();
}

void
GsSwitch::AddMember(uint32_t port, uint32_t src, uint32_t job, uint32_t srcNode, NrSwitchJob* nr, uint32_t member)
{
    m_members[MemberKey(port, src, job, srcNode)] = {nr, member};
}

bool
GsSwitch::LossHits(uint32_t port)
{
    return m_loss[port] > 0 && m_uniform(m_rng) < m_loss[port];
}

void
GsSwitch::SetDown(bool down)
{
    m_down = down;
    if (down)
    {
        for (GsDevice* dev : m_ports)
        {
            if (dev != nullptr)
            {
                uint64_t before = dev->Counters().faultDrops;
                dev->Flush();
                m_downDrops += dev->Counters().faultDrops - before; // what it had queued
            }
        }
    }
}

uint64_t
GsSwitch::FaultDrops() const
{
    return m_downDrops;
}

void
GsSwitch::Receive(uint32_t port, Ptr<Packet> p)
{
    if (m_down)
    {
        m_downDrops++;
        drops["switch-down"]++;
        return;
    }
    if (m_delayTicks > 0)
    {
        Simulator::Schedule(TimeStep(m_delayTicks), &GsSwitch::Process, this, port, p);
        return;
    }
    Process(port, p);
}

void
GsSwitch::Process(uint32_t port, Ptr<Packet> p)
{
    if (m_down)
    {
        m_downDrops++; // it died while the packet was in its pipeline
        drops["switch-down"]++;
        return;
    }
    Wire w;
    ReadWire(*p, w);
    m_ports[port]->CountRxBytes(w.wire);
    if (w.kind == KIND_ROCE && LossHits(port))
    {
        drops["fault-injected"]++;
        return;
    }
    if (w.kind == KIND_NR_PARTIAL || w.kind == KIND_NR_RESULT)
    {
        uint32_t tag = w.kind == KIND_NR_PARTIAL ? 0xFFFFF : 0xFFFFE;
        auto it = m_members.find(MemberKey(port, w.src, w.job, tag));
        if (it == m_members.end())
        {
            drops["netreduce-refused"]++;
            return;
        }
        if (w.kind == KIND_NR_PARTIAL)
        {
            it->second.first->Contribution(it->second.second, p, w);
        }
        else
        {
            it->second.first->ParentResult(p, w);
        }
        return;
    }
    if ((w.flags & F_NR) && !(w.flags & F_ACK))
    {
        auto it = m_members.find(MemberKey(port, w.src, w.job, w.srcNode));
        if (it != m_members.end())
        {
            it->second.first->Contribution(it->second.second, p, w);
            return;
        }
    }
    Forward(p, w);
}

uint8_t
GsSwitch::Classify(const Wire& w) const
{
    if (w.kind == KIND_TCP)
    {
        return 0;
    }
    if (w.resv7 & kTrimmed)
    {
        return static_cast<uint8_t>(kAckPriority); // a trimmed packet: top priority at every switch
    }
    uint8_t prio = m_s.sw.roceClass ? static_cast<uint8_t>(kRoceClassPriority) : 0;
    auto it = m_dlcp.find(w.job);
    if (it != m_dlcp.end() && it->second.priority)
    {
        if (w.flags & F_ACK)
        {
            return static_cast<uint8_t>(kAckPriority);
        }
        // gradswitch/control/controls/dlcp.py default_classes: layer class l -> priority max(1, 6 - l)
        int layer = (w.resv7 >> kLayerShift) & (kLayerClasses - 1);
        return static_cast<uint8_t>(std::max(1, 6 - layer));
    }
    return prio;
}

uint32_t
GsSwitch::FlowHash(const Wire& w, bool spray) const
{
    // The P4 program's flow key (l3_forwarding.p4 set_ecmp_group): source and destination address,
    // protocol, source and destination port, and the spray key (the PSN for a spraying DLCP job, else 0),
    // big-endian: its CRC-16 (the seed enters through the multiplier, Route).
    uint8_t key[17];
    uint32_t src = w.src < m_s.hostIps.size() ? m_s.hostIps[w.src] : 0;
    uint32_t dst = w.dst < m_s.hostIps.size() ? m_s.hostIps[w.dst] : 0;
    uint8_t proto = w.kind == KIND_TCP ? IP_PROTO_TCP : IP_PROTO_UDP;
    uint32_t sprayKey = spray ? w.psn : 0;
    key[0] = src >> 24;
    key[1] = src >> 16;
    key[2] = src >> 8;
    key[3] = src;
    key[4] = dst >> 24;
    key[5] = dst >> 16;
    key[6] = dst >> 8;
    key[7] = dst;
    key[8] = proto;
    key[9] = w.sport >> 8;
    key[10] = w.sport;
    key[11] = w.dport >> 8;
    key[12] = w.dport;
    key[13] = sprayKey >> 24;
    key[14] = sprayKey >> 16;
    key[15] = sprayKey >> 8;
    key[16] = sprayKey;
    return Crc16(key, sizeof(key));
}

int32_t
GsSwitch::Route(const Wire& w)
{
    if (w.dst >= m_s.table.hostPort.size())
    {
        return -1;
    }
    int32_t local = m_s.table.hostPort[w.dst];
    if (local >= 0)
    {
        return local;
    }
    int32_t group = m_s.table.edgeGroup[m_s.table.hostEdge[w.dst]];
    if (group < 0)
    {
        return -1;
    }
    const auto& members = m_s.table.groups[group];
    if (members.size() == 1)
    {
        return members[0];
    }
    bool spray = false;
    if (w.kind == KIND_ROCE)
    {
        auto it = m_dlcp.find(w.job);
        spray = it != m_dlcp.end() && it->second.spray;
    }
    uint32_t crc = FlowHash(w, spray);
    uint32_t size = static_cast<uint32_t>(members.size());
    if (!spray && m_s.sw.loadBalance == LoadBalance::Flowlet)
    {
        // LetFlow as set_flowlet_group: the slot keeps its member while its packets come closer than the gap;
        // the first packet after a longer idle gap (or a member beyond this group) draws a 16-bit number r and
        // takes member (r x size) >> 16.
        int64_t now = NowTicks();
        uint32_t slot = crc & (FLOWLET_SLOTS - 1);
        int64_t last = m_flowletTime[slot];
        if (last < 0 || now - last > m_flowletGapTicks || m_flowletMember[slot] >= size)
        {
            uint32_t draw = static_cast<uint32_t>(m_rng() & 0xFFFF);
            m_flowletMember[slot] = (draw * size) >> 16;
        }
        m_flowletTime[slot] = now;
        return members[m_flowletMember[slot]];
    }
    // ECMP_MEMBER: bits 16..31 of the CRC-16 times the multiplier (mod 2^32), mod the group's size
    uint32_t mixed = static_cast<uint32_t>(((static_cast<uint64_t>(crc) * m_s.sw.ecmpMultiplier) >> 16) & 0xFFFF);
    return members[mixed % size];
}

void
GsSwitch::Forward(Ptr<Packet> p, Wire& w, std::optional<uint8_t> queue)
{
    int32_t port = Route(w);
    if (port < 0 || static_cast<uint32_t>(port) >= m_ports.size() || m_ports[port] == nullptr)
    {
        drops["no-route"]++;
        return;
    }
    SendToPort(static_cast<uint32_t>(port), p, w, queue);
}

void
GsSwitch::Rewrite(Ptr<Packet> p, const Wire& w)
{
    GsHeader old;
    p->RemoveHeader(old);
    GsHeader h;
    h.w = w;
    p->AddHeader(h);
}

void
GsSwitch::SendToPort(uint32_t port, Ptr<Packet> p, Wire& w, std::optional<uint8_t> queue)
{
    GsDevice* dev = m_ports[port];
    if (w.kind == KIND_ROCE && LossHits(port))
    {
        drops["fault-injected"]++;
        return;
    }
    // every switch classifies again (the P4 program's ingress): not written back
    uint8_t prio = queue ? *queue : Classify(w);
    w.prio = prio;
    auto it = w.kind == KIND_ROCE ? m_dlcp.find(w.job) : m_dlcp.end();
    if (it != m_dlcp.end())
    {
        bool ack = (w.flags & F_ACK) != 0;
        bool droppable = it->second.drop && !ack && (w.resv7 & kDroppable) && !(w.resv7 & kTrimmed) &&
                         !(w.flags & F_NR) && w.kind == KIND_ROCE;
        DlcpEvents& ev = dlcpEvents[w.job];
        if (it->second.priority && !ack)
        {
            ev.classified++;
        }
        // dlcp.p4 DlcpEgress: the (port, priority) virtual queue drained at the port's rate; a droppable
        // packet at or over its priority's threshold is dropped, here trimmed (docs/dlcp.md); else it joins.
        if (prio < m_s.dlcpThresholds.size())
        {
            size_t vq = static_cast<size_t>(port) * kPriorities + prio;
            int64_t now = NowTicks();
            double drained = dev->Rate() / 8.0 * static_cast<double>(now - m_vqTime[vq]) * 1e-12;
            m_vqBytes[vq] = std::max(0.0, m_vqBytes[vq] - drained);
            m_vqTime[vq] = now;
            int64_t threshold = m_s.dlcpThresholds[prio];
            bool dropNow = droppable && threshold >= 0 && m_vqBytes[vq] >= static_cast<double>(threshold);
            if (dropNow)
            {
                ev.dropped++;
                // Trim: the headers go on (RETH, ImmDt kept) at the top priority, marked trimmed.
                w.resv7 = static_cast<uint8_t>(w.resv7 | kTrimmed);
                w.prio = static_cast<uint8_t>(kAckPriority);
                prio = w.prio;
                w.payload = 0;
                w.wire = m_s.wire.roceOverhead + ((w.flags & F_RETH) ? m_s.wire.reth : 0) +
                         ((w.flags & F_IMM) ? m_s.wire.imm : 0);
                Ptr<Packet> trimmed = Create<Packet>();
                GsHeader h;
                h.w = w;
                trimmed->AddHeader(h);
                p = trimmed;
            }
            else
            {
                m_vqBytes[vq] += w.wire;
                if (droppable)
                {
                    ev.kept++;
                }
            }
        }
        else if (droppable)
        {
            ev.kept++;
        }
    }
    if (!dev->Enqueue(p, w.wire, prio))
    {
        drops["queue-full"]++;
    }
}

} // namespace gs
} // namespace ns3
