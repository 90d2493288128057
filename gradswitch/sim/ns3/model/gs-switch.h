// A switch: ports (GsDevice) and the per-packet logic of gradswitch/p4src/gradswitch.p4 that matters for timing and
// sums, without an IP stack: forwarding from a table computed at set-up (gs-topology.h), ECMP on the
// 5-tuple (BMv2's crc16 over the same fields, plus a seed), flowlet switching, DLCP (class -> strict
// priority, the per-port per-priority virtual queue and its selective drop, here trimming, and spraying),
// the RoCE class, fault injection (loss on chosen host ports), and NetReduce (gs-netreduce-switch.h).
#ifndef GS_SWITCH_H
#define GS_SWITCH_H

#include "gs-config.h"
#include "gs-device.h"
#include "gs-header.h"
#include "gs-topology.h"

#include "ns3/node.h"
#include "ns3/random-variable-stream.h"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{
namespace gs
{

class NrSwitchJob;

struct DlcpJobFeatures
{
    bool priority = false;
    bool drop = false;
    bool spray = false;
};

struct DlcpEvents
{
    uint64_t kept = 0;
    uint64_t dropped = 0; // trimmed: the payload dropped, the headers forwarded
    uint64_t classified = 0;
};

class GsSwitch : public Node, public PortOwner
{
  public:
    static TypeId GetTypeId();
    GsSwitch();
    /// A node simulated by MPI rank `systemId` (ns-3's Node(systemId)); every rank creates every node.
    explicit GsSwitch(uint32_t systemId);
    ~GsSwitch() override;

    struct Settings
    {
        uint32_t index = 0;       // node index (hosts first)
        std::string name;
        ForwardingTable table;
        std::vector<uint32_t> hostIps;
        SwitchSettings sw;
        std::vector<int64_t> dlcpThresholds; // per priority, bytes (-1: never)
        uint64_t seed = 1;
        WireSizes wire;
    };

    void Setup(Settings s);
    void AddPort(uint32_t port, Ptr<GsDevice> dev);
    void SetLossyPort(uint32_t port, double fraction);
    void SetDlcp(uint32_t job, DlcpJobFeatures f);
    /// A NetReduce job's role on this switch; member keys are registered by the job.
    NrSwitchJob* AddNetReduceJob(std::unique_ptr<NrSwitchJob> job);
    void AddMember(uint32_t port, uint32_t src, uint32_t job, uint32_t srcNode, NrSwitchJob* nr, uint32_t member);

    uint32_t Index() const
    {
        return m_s.index;
    }

    /// A fault (gs-fault-schedule.h): a crashed switch drops everything it receives and loses what it queued;
    /// restarted, it forwards again by the table it is given.
    void SetDown(bool down);

    bool Down() const
    {
        return m_down;
    }

    /// The controller's routes after a reroute (gs-rerouter.h).
    void SetTable(ForwardingTable table)
    {
        m_s.table = std::move(table);
    }

    /// Packets lost to faults here: received while down, and queued when it went down.
    uint64_t FaultDrops() const;

    const std::string& Name() const
    {
        return m_s.name;
    }

    // PortOwner
    void Receive(uint32_t port, Ptr<Packet> p) override;

    /// Route a packet by its destination host and send it (egress: DLCP, loss, queue). `queue`: the priority
    /// queue it joins, when not the one this switch classifies it to (a copy trimmed in egress joins the queue its
    /// whole packet was classified to in ingress: NrSwitchJob).
    void Forward(Ptr<Packet> p, Wire& w, std::optional<uint8_t> queue = std::nullopt);
    /// Send a packet out of a given port (egress: DLCP, loss, queue).
    void SendToPort(uint32_t port, Ptr<Packet> p, Wire& w, std::optional<uint8_t> queue = std::nullopt);
    /// The priority queue a packet joins here (the P4 program's ingress classification).
    uint8_t Classify(const Wire& w) const;
    /// Replace a packet's header (the packet keeps its payload).
    static void Rewrite(Ptr<Packet> p, const Wire& w);

    std::map<std::string, uint64_t> drops;
    std::map<uint32_t, DlcpEvents> dlcpEvents;
    const std::map<uint32_t, Ptr<GsDevice>>& Ports() const
    {
        return m_portMap;
    }

    const std::vector<std::unique_ptr<NrSwitchJob>>& NetReduceJobs() const
    {
        return m_nr;
    }

    /// Test fault injection: should this accepted NetReduce contribution be added twice?
    bool DoubleAddFault()
    {
        if (m_s.sw.faultDoubleAdd == 0)
        {
            return false;
        }
        m_s.sw.faultDoubleAdd--;
        drops["fault-double-add"]++;
        return true;
    }

    /// CRC-16/ARC (BMv2's crc16) of a byte string.
    static uint16_t Crc16(const uint8_t* data, size_t len);

  private:
    void Process(uint32_t port, Ptr<Packet> p);
    int32_t Route(const Wire& w);
    uint32_t FlowHash(const Wire& w, bool spray) const;

  public:
    /// The port Route gives a packet (for tests: gradswitch-sim --tables with ecmp_probes).
    int32_t Probe(const Wire& w)
    {
        return Route(w);
    }

  private:
    bool LossHits(uint32_t port);

    Settings m_s;
    int64_t m_delayTicks = 0;
    bool m_down = false;
    uint64_t m_downDrops = 0; // received while down, or queued when it went down
    std::vector<GsDevice*> m_ports; // by port number
    std::map<uint32_t, Ptr<GsDevice>> m_portMap;
    std::vector<double> m_loss;     // by port number: fraction of RoCE packets dropped both ways
    std::mt19937_64 m_rng;
    std::uniform_real_distribution<double> m_uniform{0.0, 1.0};
    std::unordered_map<uint32_t, DlcpJobFeatures> m_dlcp;
    // DLCP virtual queue per (port, priority): bytes and when last drained (ps)
    std::vector<double> m_vqBytes;
    std::vector<int64_t> m_vqTime;
    // flowlets, as the P4 program's registers: per slot (the low bits of the flow key's CRC-16; flows that
    // share a slot share it) when it last saw a packet (-1: never) and its member
    std::vector<int64_t> m_flowletTime;
    std::vector<uint32_t> m_flowletMember;
    int64_t m_flowletGapTicks = 0;
    std::vector<std::unique_ptr<NrSwitchJob>> m_nr;
    std::unordered_map<uint64_t, std::pair<NrSwitchJob*, uint32_t>> m_members;
};

} // namespace gs
} // namespace ns3

#endif
