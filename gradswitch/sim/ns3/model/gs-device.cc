#include "gs-device.h"

#include "gs-events.h"
#include "gs-ticks.h"

#include "ns3/point-to-point-channel.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{
namespace gs
{

NS_OBJECT_ENSURE_REGISTERED(GsDevice);

uint64_t GsDevice::s_hops = 0;

TypeId
GsDevice::GetTypeId()
{
    static TypeId tid = TypeId("ns3::gs::GsDevice")
                            .SetParent<PointToPointNetDevice>()
                            .SetGroupName("Gradswitch")
                            .AddConstructor<GsDevice>()
                            .AddAttribute("QueueBytes",
                                          "Bytes each of the 8 priority queues holds (tail drop beyond)",
                                          UintegerValue(1 << 20),
                                          MakeUintegerAccessor(&GsDevice::m_limit),
                                          MakeUintegerChecker<uint64_t>())
                            .AddAttribute("FramingBytes",
                                          "Bytes every frame adds on the link besides its size (preamble, gap)",
                                          UintegerValue(0),
                                          MakeUintegerAccessor(&GsDevice::m_framing),
                                          MakeUintegerChecker<uint32_t>());
    return tid;
}

GsDevice::GsDevice() = default;

void
GsDevice::Configure(double bps, uint64_t queueBytes, uint32_t framingBytes, PortOwner* owner, uint32_t port)
{
    m_bps = bps;
    m_psPerByte = 8e12 / bps;
    m_limit = queueBytes;
    m_framing = framingBytes;
    m_owner = owner;
    m_port = port;
    m_pull = owner->Pulls();
    m_context = GetNode() != nullptr ? GetNode()->GetId() : 0;
}

bool
GsDevice::Enqueue(Ptr<Packet> p, uint32_t wire, uint8_t prio)
{
    if (m_nonEmpty == 0 && NowTicks() >= m_busyUntil)
    {
        Transmit(p, wire);
        return true;
    }
    if (m_qBytes[prio] + wire > m_limit)
    {
        m_counters.drops++;
        m_counters.dropBytes += wire;
        return false;
    }
    Item item{nullptr, wire, {}};
    if (p->GetSize() == sizeof(Wire))
    {
        ReadWire(*p, item.header);
    }
    else
    {
        item.p = std::move(p);
    }
    m_q[prio].push_back(std::move(item));
    m_qBytes[prio] += wire;
    m_nonEmpty |= static_cast<uint8_t>(1u << prio);
    if (m_qBytes[prio] > m_counters.maxQueueBytes)
    {
        m_counters.maxQueueBytes = m_qBytes[prio];
    }
    Wake();
    return true;
}

void
GsDevice::Wake()
{
    if (!m_wakePending)
    {
        m_wakePending = true;
        int64_t now = NowTicks();
        Simulator::ScheduleWithContext(m_context, TimeStep(std::max<int64_t>(0, m_busyUntil - now)),
                                       new CallEvent<GsDevice, &GsDevice::TransmitDone>(this));
    }
}

void
GsDevice::Kick()
{
    if (m_nonEmpty != 0 || NowTicks() < m_busyUntil)
    {
        if (m_pull)
        {
            Wake(); // pulls when the link is free
        }
        return;
    }
    Ptr<Packet> p;
    uint32_t wire = 0;
    if (m_owner->Pull(m_port, p, wire))
    {
        Transmit(p, wire);
    }
}

void
GsDevice::Transmit(Ptr<Packet> p, uint32_t wire)
{
    int64_t ps = std::llround((wire + m_framing) * m_psPerByte);
    m_busyUntil = NowTicks() + ps;
    m_counters.txPackets++;
    m_counters.txBytes += wire;
    m_counters.busyPs += static_cast<uint64_t>(ps);
    if (m_channel == nullptr)
    {
        m_channel = static_cast<PointToPointChannel*>(PeekPointer(GetChannel()));
    }
    m_channel->TransmitStart(p, this, TimeStep(ps));
    // A port whose queues are empty needs no event when its packet ends (the next arrival finds it free);
    // a host's pulls, or queued packets, do.
    if (m_nonEmpty != 0 || m_pull)
    {
        Wake();
    }
}

void
GsDevice::TransmitDone()
{
    m_wakePending = false;
    if (NowTicks() < m_busyUntil)
    {
        Wake(); // a packet went out directly in the meantime
        return;
    }
    if (m_nonEmpty != 0)
    {
        uint8_t prio = static_cast<uint8_t>(31 - __builtin_clz(m_nonEmpty)); // the highest non-empty priority
        Item& item = m_q[prio].front();
        Ptr<Packet> p = item.p != nullptr ? std::move(item.p) : HeaderPacket(item.header);
        uint32_t wire = item.wire;
        m_q[prio].pop_front();
        m_qBytes[prio] -= wire;
        if (m_q[prio].empty())
        {
            m_nonEmpty &= static_cast<uint8_t>(~(1u << prio));
        }
        Transmit(p, wire);
        return;
    }
    if (m_pull)
    {
        Ptr<Packet> p;
        uint32_t wire = 0;
        if (m_owner->Pull(m_port, p, wire))
        {
            Transmit(p, wire);
        }
    }
}

void
GsDevice::Flush()
{
    for (uint8_t prio = 0; prio < kPriorities; prio++)
    {
        m_counters.faultDrops += m_q[prio].size();
        m_q[prio].clear();
        m_qBytes[prio] = 0;
    }
    m_nonEmpty = 0;
}

void
GsDevice::SetRate(double bps)
{
    m_bps = bps;
    m_psPerByte = 8e12 / bps;
}

void
GsDevice::Deliver(Ptr<Packet> p)
{
    if (m_down)
    {
        m_counters.faultDrops++;
        return;
    }
    s_hops++;
    m_counters.rxPackets++;
    m_owner->Receive(m_port, p);
}

} // namespace gs
} // namespace ns3
