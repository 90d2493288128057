#include "gs-channel.h"

#include "gs-device.h"
#include "gs-events.h"

#include "ns3/boolean.h"
#include "ns3/simulator.h"

#ifdef NS3_MPI
#include "ns3/mpi-interface.h"
#include "ns3/mpi-receiver.h"

#include <cstring>
#include <stdexcept>
#endif

namespace ns3
{
namespace gs
{

NS_OBJECT_ENSURE_REGISTERED(GsChannel);

TypeId
GsChannel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::gs::GsChannel")
                            .SetParent<PointToPointChannel>()
                            .SetGroupName("Gradswitch")
                            .AddConstructor<GsChannel>()
                            .AddAttribute("Shaped",
                                          "A token-bucket shaper, as the testbed's HTB on a veth: a packet reaches "
                                          "the far end when it leaves (after the delay), and the sending port stays "
                                          "busy for its time at the rate; false: a wire that serializes it first",
                                          BooleanValue(false),
                                          MakeBooleanAccessor(&GsChannel::m_shaped),
                                          MakeBooleanChecker());
    return tid;
}

bool
GsChannel::TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime)
{
    if (m_end[0] == nullptr)
    {
        m_end[0] = static_cast<GsDevice*>(PeekPointer(GetPointToPointDevice(0)));
        m_end[1] = static_cast<GsDevice*>(PeekPointer(GetPointToPointDevice(1)));
        m_context[0] = m_end[0]->GetNode()->GetId();
        m_context[1] = m_end[1]->GetNode()->GetId();
        m_delayTicks = GetDelay().GetTimeStep();
    }
    int d = PeekPointer(src) == m_end[0] ? 1 : 0;
    // The packet is the sender's no more (its device let go of it): no copy.
    Simulator::ScheduleWithContext(m_context[d], (m_shaped ? Time(0) : txTime) + TimeStep(m_delayTicks),
                                   new PacketEvent<GsDevice, &GsDevice::Deliver>(m_end[d], ConstCast<Packet>(p)));
    return true;
}

#ifdef NS3_MPI

NS_OBJECT_ENSURE_REGISTERED(GsRemoteChannel);

namespace
{

/// Before each fragment's bytes: which it is and how many the packet has.
struct FragmentTag
{
    uint16_t index;
    uint16_t count;
};

} // namespace

TypeId
GsRemoteChannel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::gs::GsRemoteChannel")
                            .SetParent<PointToPointRemoteChannel>()
                            .SetGroupName("Gradswitch")
                            .AddConstructor<GsRemoteChannel>()
                            .AddAttribute("Shaped", "As GsChannel's Shaped", BooleanValue(false),
                                          MakeBooleanAccessor(&GsRemoteChannel::m_shaped),
                                          MakeBooleanChecker());
    return tid;
}

bool
GsRemoteChannel::TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime)
{
    Ptr<PointToPointNetDevice> dst = GetPointToPointDevice(src == GetPointToPointDevice(0) ? 1 : 0);
    Time rx = Simulator::Now() + (m_shaped ? Time(0) : txTime) + GetDelay();
    uint32_t size = p->GetSize();
    uint32_t count = std::max<uint32_t>(1, (size + kFragmentBytes - 1) / kFragmentBytes);
    if (count > UINT16_MAX)
    {
        throw std::runtime_error("a packet of " + std::to_string(size) + " bytes is too large to send between ranks");
    }
    for (uint32_t i = 0; i < count; i++)
    {
        uint32_t offset = i * kFragmentBytes;
        FragmentTag tag{static_cast<uint16_t>(i), static_cast<uint16_t>(count)};
        Ptr<Packet> part = Create<Packet>(reinterpret_cast<const uint8_t*>(&tag), sizeof tag);
        part->AddAtEnd(p->CreateFragment(offset, std::min(kFragmentBytes, size - offset)));
        MpiInterface::SendPacket(part, rx, dst->GetNode()->GetId(), dst->GetIfIndex());
    }
    return true;
}

void
GsRemoteChannel::Listen(Ptr<GsDevice> dev)
{
    Reassembly* r = &m_rx[m_listening++];
    r->dev = PeekPointer(dev);
    Ptr<MpiReceiver> receiver = CreateObject<MpiReceiver>();
    receiver->SetReceiveCallback(MakeCallback(&GsRemoteChannel::Receive, this).Bind(r));
    dev->AggregateObject(receiver);
}

void
GsRemoteChannel::Receive(Reassembly* r, Ptr<Packet> fragment)
{
    FragmentTag tag;
    uint32_t size = fragment->GetSize();
    if (size < sizeof tag)
    {
        throw std::runtime_error("internal: a fragment of " + std::to_string(size) + " bytes from another rank");
    }
    fragment->CopyData(reinterpret_cast<uint8_t*>(&tag), sizeof tag);
    fragment->RemoveAtStart(sizeof tag);
    if (tag.count == 1)
    {
        r->dev->Deliver(fragment);
        return;
    }
    if (r->parts.size() != tag.count)
    {
        r->parts.assign(tag.count, nullptr);
        r->got = 0;
    }
    r->parts[tag.index] = fragment;
    if (++r->got < tag.count)
    {
        return;
    }
    Ptr<Packet> whole = r->parts[0];
    for (uint16_t i = 1; i < tag.count; i++)
    {
        whole->AddAtEnd(r->parts[i]);
    }
    r->parts.clear();
    r->got = 0;
    r->dev->Deliver(whole);
}

#endif

} // namespace gs
} // namespace ns3
