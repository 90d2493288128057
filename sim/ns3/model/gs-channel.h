// A link: an ns-3 PointToPointChannel (so that ns-3's distributed simulator can cut it, as a
// PointToPointRemoteChannel, issue 18) whose transmissions go straight to the far GsDevice, without the
// PPP framing and trace sources of PointToPointNetDevice::Receive.
#ifndef GS_CHANNEL_H
#define GS_CHANNEL_H

#include "ns3/point-to-point-channel.h"

namespace ns3
{
namespace gs
{

class GsDevice;

class GsChannel : public PointToPointChannel
{
  public:
    static TypeId GetTypeId();

    bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override;

  private:
    GsDevice* m_end[2] = {nullptr, nullptr}; // the two devices, once both are attached
    uint32_t m_context[2] = {0, 0};       // their nodes' ids (the context of their events)
    int64_t m_delayTicks = -1;
};

} // namespace gs
} // namespace ns3

#endif
