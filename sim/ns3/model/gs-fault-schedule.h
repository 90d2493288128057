// The run's faults (topology/faults.py, written by ns3sim as `fault_schedule`), carried out in simulated time
// after the jobs' start, and what each did: a switch crash (it drops everything and loses its queues; back
// with its tables after the window), a link down or flapping (both directions drop), a worker crash (its
// process dies: its job stops, the iterations it completed kept), a slow worker (computation x factor, its
// link's rate cut). The control plane notices a dead switch after SwitchDetectDelay (its P4Runtime stream) and
// a dead link after LinkDetectDelay (port state), and routes around it (gs-rerouter.h); the queue pairs ride
// through on their retransmissions. Per fault it measures when it was injected, noticed and recovered from
// (the last queue pair it stalled made progress again), the packets it cost and the stalls.
#ifndef GS_FAULT_SCHEDULE_H
#define GS_FAULT_SCHEDULE_H

#include "gs-config.h"
#include "gs-host.h"
#include "gs-qp.h"
#include "gs-rerouter.h"
#include "gs-switch.h"
#include "gs-topology.h"

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ns3
{
namespace gs
{

class JobNode;

/// What faults act on: the simulation's network and its job nodes.
struct FaultNetwork
{
    const Topology* topo = nullptr;
    const std::vector<Ptr<GsHost>>* hosts = nullptr;    // by host index
    const std::vector<Ptr<GsSwitch>>* switches = nullptr; // by switch index - hosts
    std::function<JobNode*(uint32_t jobId, uint32_t node)> node; // a job node on this rank (nullptr: elsewhere)
};

class FaultSchedule : public Object, public StallObserver
{
  public:
    static TypeId GetTypeId();
    FaultSchedule();
    ~FaultSchedule() override;

    /// The faults, their targets resolved on the network (ConfigError naming a target it does not have).
    void Setup(std::vector<FaultSpec> faults, FaultNetwork net);
    /// Schedule every fault (before the simulation runs).
    void Start();
    /// What each fault did (docs/simulator.md "Faults"), in the configuration's order.
    nlohmann::json Results() const;

    // StallObserver
    void OnStall(const RcQp& qp) override;
    void OnResume(const RcQp& qp, int64_t stalledAtTicks) override;

  private:
    struct Record
    {
        int64_t injected = -1;  // ticks (-1: not yet / never: the run ended first)
        int64_t detected = -1;
        int64_t recovered = -1; // the last stalled queue pair's progress
        int64_t firstStall = -1; // the first stall put down to it (a queue pair learnt of a loss)
        int64_t lastUp = -1;    // the end of its last window (-1: none yet, or out for good)
        uint64_t stalls = 0;    // queue pairs it stalled (a timeout or a NAK)
        uint64_t resumed = 0;   // of which made progress again
        uint32_t window = 0;    // the window under way (link faults: detection of this one only)
        bool out = false;       // the element is out now
    };

    void Down(size_t f, uint32_t window);
    void Up(size_t f, uint32_t window);
    void Detect(size_t f, uint32_t window);
    void DetectUp(size_t f, uint32_t window);
    void Worker(size_t f);
    /// The ports of a link fault's two ends.
    std::pair<GsDevice*, GsDevice*> LinkDevices(const FaultSpec& spec) const;
    GsDevice* DeviceTo(uint32_t node, uint32_t peer) const;
    uint64_t LostPackets(size_t f) const;

    Time m_switchDetect;
    Time m_linkDetect;
    std::vector<FaultSpec> m_faults;
    std::vector<Record> m_records;
    FaultNetwork m_net;
    std::unique_ptr<Rerouter> m_rerouter;
    std::unordered_map<const RcQp*, size_t> m_stalled; // a stalled queue pair: the fault it is put down to
};

} // namespace gs
} // namespace ns3

#endif
