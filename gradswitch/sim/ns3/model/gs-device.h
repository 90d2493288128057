// A port: a PointToPointNetDevice (so it may sit on a PointToPointChannel, or on the
// PointToPointRemoteChannel of a cut link under MPI) with the testbed's egress queueing: 8 strict-priority
// byte-limited drop-tail queues (gradswitch/net/shaping.py: one HTB class and byte FIFO per priority, the
// highest priority first), serialized at the link rate. A host's port also pulls packets from its owner
// when its queues are empty (a NIC taking the next packet of its queue pairs when the link is free).
#ifndef GS_DEVICE_H
#define GS_DEVICE_H

#include "gs-constants.h"
#include "gs-header.h"

#include "ns3/point-to-point-channel.h"
#include "ns3/point-to-point-net-device.h"

#include <array>
#include <cstdint>
#include <deque>

namespace ns3
{
namespace gs
{

/// Who owns a port: gets what arrives on it and, for a host, is asked for the next packet to send.
class PortOwner
{
  public:
    virtual ~PortOwner() = default;
    virtual void Receive(uint32_t port, Ptr<Packet> p) = 0;

    /// A packet to send now when the port's queues are empty (false: nothing).
    virtual bool Pull(uint32_t port, Ptr<Packet>& p, uint32_t& wire)
    {
        return false;
    }

    /// Whether the owner sends by Pull (a host) rather than only by Enqueue (a switch).
    virtual bool Pulls() const
    {
        return false;
    }
};

struct PortCounters
{
    uint64_t rxPackets = 0;
    uint64_t rxBytes = 0;
    uint64_t txPackets = 0;
    uint64_t txBytes = 0;
    uint64_t drops = 0;      // tail drops (a full queue)
    uint64_t dropBytes = 0;
    uint64_t busyPs = 0;     // time spent transmitting
    uint64_t maxQueueBytes = 0;
    uint64_t faultDrops = 0; // lost to a fault: arrived while the link was down, or queued when its switch died
};

class GsDevice : public PointToPointNetDevice
{
  public:
    static TypeId GetTypeId();
    GsDevice();

    /// Rate (bits/s), per-priority queue limit (bytes), bytes every frame adds on the link besides its
    /// `wire` size (0 as the testbed's HTB counts; 20 for preamble and gap), owner and port number.
    void Configure(double bps, uint64_t queueBytes, uint32_t framingBytes, PortOwner* owner, uint32_t port);

    /// Queue a packet of `wire` bytes at priority prio (0..7, 7 first); false when its queue is full
    /// (tail drop, counted).
    bool Enqueue(Ptr<Packet> p, uint32_t wire, uint8_t prio);
    /// The owner may have a packet to send (pull): start if idle.
    void Kick();
    /// From the channel: a packet arrived (or from MPI, for a cut link).
    void Deliver(Ptr<Packet> p);

    /// A fault (gs-fault-schedule.h): while down, what arrives on this end of the link is lost.
    void SetDown(bool down)
    {
        m_down = down;
    }

    bool Down() const
    {
        return m_down;
    }

    /// Its switch died: every queued packet is lost (counted as fault drops).
    void Flush();
    /// A fault cuts (or restores) the link's rate, from the next packet on.
    void SetRate(double bps);

    uint64_t QueueBytes(uint8_t prio) const
    {
        return m_qBytes[prio];
    }


    double Rate() const
    {
        return m_bps;
    }

    uint32_t Port() const
    {
        return m_port;
    }

    void CountRxBytes(uint32_t bytes)
    {
        m_counters.rxBytes += bytes;
    }

    const PortCounters& Counters() const
    {
        return m_counters;
    }

    /// Packet-hops delivered by every device so far (what the speed figures count).
    static uint64_t Hops()
    {
        return s_hops;
    }

  private:
    /// A queued packet. One that is nothing but its header (every packet but those carrying values in exact
    /// mode) waits as that header, and is a Packet again when it leaves: an ns-3 Packet takes three
    /// allocations, ~270 bytes, and a parameter server's incast queues all of its workers' windows.
    struct Item
    {
        Ptr<Packet> p; // null: the packet is `header`
        uint32_t wire;
        Wire header;
    };

    void Transmit(Ptr<Packet> p, uint32_t wire);
    void TransmitDone();
    void Wake();

    PortOwner* m_owner = nullptr;
    PointToPointChannel* m_channel = nullptr;
    uint32_t m_port = 0;
    double m_bps = 1e9;
    double m_psPerByte = 8000.0;
    uint64_t m_limit = 1 << 20;
    uint32_t m_framing = 0;
    int64_t m_busyUntil = 0;   // the link is busy until then (ps)
    bool m_wakePending = false; // a TransmitDone is scheduled
    bool m_pull = false;
    bool m_down = false; // a fault: what arrives is lost
    uint32_t m_context = 0; // its node's id: the context of its events
    uint8_t m_nonEmpty = 0; // bit p: queue p holds packets
    std::array<std::deque<Item>, kPriorities> m_q;
    std::array<uint64_t, kPriorities> m_qBytes{};
    PortCounters m_counters;
    static uint64_t s_hops;
};

} // namespace gs
} // namespace ns3

#endif
