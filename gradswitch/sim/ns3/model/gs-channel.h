// A link: an ns-3 PointToPointChannel (so that ns-3's distributed simulator can cut it, as a
// PointToPointRemoteChannel) whose transmissions go straight to the far GsDevice, without the
// PPP framing and trace sources of PointToPointNetDevice::Receive.
#ifndef GS_CHANNEL_H
#define GS_CHANNEL_H

#include "ns3/point-to-point-channel.h"

#ifdef NS3_MPI
#include "ns3/point-to-point-remote-channel.h"

#include <vector>
#endif

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
    bool m_shaped = false; // Shaped: the far end gets a packet as its transmission starts
};

#ifdef NS3_MPI
/// A link cut between MPI ranks: ns-3's PointToPointRemoteChannel, which sends a packet to the
/// far end's rank with MpiInterface::SendPacket to arrive after its transmission and the delay. ns-3's MPI
/// messages hold at most 2000 bytes (MAX_MPI_MSG_SIZE), so a packet is sent in fragments of at most
/// kFragmentBytes, each arriving at the same time, and the far end's device gets it whole once every
/// fragment is there (their order within that instant does not matter).
class GsRemoteChannel : public PointToPointRemoteChannel
{
  public:
    static TypeId GetTypeId();

    /// Bytes of a packet per MPI message: ns-3's 2000 less its own and the packet's serialization headers.
    static constexpr uint32_t kFragmentBytes = 1800;

    bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override;
    /// Fragments arriving (from MPI) for this end's device go to it whole: aggregates its MpiReceiver.
    void Listen(Ptr<GsDevice> dev);

  private:
    struct Reassembly
    {
        GsDevice* dev = nullptr;
        std::vector<Ptr<Packet>> parts;
        uint32_t got = 0;
    };

    void Receive(Reassembly* r, Ptr<Packet> fragment);

    Reassembly m_rx[2];
    uint32_t m_listening = 0;
    bool m_shaped = false;
};
#endif

} // namespace gs
} // namespace ns3

#endif
