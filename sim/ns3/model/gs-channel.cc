#include "gs-channel.h"

#include "gs-device.h"
#include "gs-events.h"

#include "ns3/simulator.h"

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
                            .AddConstructor<GsChannel>();
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
    Simulator::ScheduleWithContext(m_context[d], txTime + TimeStep(m_delayTicks),
                                   new PacketEvent<GsDevice, &GsDevice::Deliver>(m_end[d], ConstCast<Packet>(p)));
    return true;
}

} // namespace gs
} // namespace ns3
