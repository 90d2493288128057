// A host: one NIC port (GsDevice) and the RDMA NIC's logic. Received packets go to their queue pair
// (by job, local node and remote node) or to a background TCP endpoint. ACKs and NAKs are queued at the
// highest priority (the testbed's host shaper sends a host's own RoCE ACKs ahead of its data); data is
// pulled from the queue pairs when the link is free: round robin among the QPs that have something to
// send, by NIC priority class (TensorLights: a colocated server's class) first.
#ifndef GS_HOST_H
#define GS_HOST_H

#include "gs-device.h"
#include "gs-qp.h"

#include "ns3/node.h"

#include <array>
#include <deque>
#include <memory>
#include <unordered_map>

namespace ns3
{
namespace gs
{

/// Something else that sends and receives on a host (a background TCP endpoint).
class HostEndpoint
{
  public:
    virtual ~HostEndpoint() = default;
    virtual void Receive(const Wire& w) = 0;
    virtual bool NextPacket(Ptr<Packet>& p, uint32_t& wire) = 0;
    bool inActiveList = false;
};

class GsHost : public Node, public PortOwner, public QpHost
{
  public:
    static TypeId GetTypeId();
    GsHost();
    /// A node simulated by MPI rank `systemId` (ns-3's Node(systemId)); every rank creates every node.
    explicit GsHost(uint32_t systemId);

    void Setup(uint32_t index, Ptr<GsDevice> nic, double messageDelayS);

    uint32_t Index() const
    {
        return m_index;
    }

    /// A queue pair of job node `local` to job node `remote`; created on first use.
    RcQp* Qp(const QpConfig& cfg);
    RcQp* FindQp(uint32_t job, uint32_t local, uint32_t remote) const;
    const std::unordered_map<uint64_t, std::unique_ptr<RcQp>>& Qps() const
    {
        return m_qps;
    }

    /// A TCP endpoint receiving packets of `port` (its local port number).
    void AddEndpoint(uint16_t port, HostEndpoint* e);
    void ActivateEndpoint(HostEndpoint* e);
    /// A QP's NIC class changes (TensorLights rotation).
    void SetNicClass(RcQp* qp, uint8_t cls);

    /// Deliver a completion to the application after the host's per-message delay.
    void Deliver(std::function<void()> f);

    // PortOwner
    void Receive(uint32_t port, Ptr<Packet> p) override;
    bool Pull(uint32_t port, Ptr<Packet>& p, uint32_t& wire) override;

    bool Pulls() const override
    {
        return true;
    }

    // QpHost
    void SendControl(Ptr<Packet> p, uint32_t wire) override;
    void Activate(RcQp* qp) override;

    Ptr<GsDevice> Nic() const
    {
        return m_nic;
    }

    uint64_t txPackets = 0;
    uint64_t txBytes = 0;
    uint64_t rxPackets = 0;
    uint64_t rxBytes = 0;
    uint64_t unknownQp = 0;

  private:
    static uint64_t Key(uint32_t job, uint32_t local, uint32_t remote)
    {
        return (static_cast<uint64_t>(job) << 48) | (static_cast<uint64_t>(local) << 24) | remote;
    }

    uint32_t m_index = 0;
    Ptr<GsDevice> m_nic;
    int64_t m_messageDelayTicks = 0;
    std::unordered_map<uint64_t, std::unique_ptr<RcQp>> m_qps;
    std::array<std::deque<RcQp*>, kPriorities> m_active;
    std::deque<HostEndpoint*> m_activeEndpoints;
    std::unordered_map<uint16_t, HostEndpoint*> m_endpoints;
};

} // namespace gs
} // namespace ns3

#endif
