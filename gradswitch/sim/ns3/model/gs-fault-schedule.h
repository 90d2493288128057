// The run's faults (gradswitch/topology/faults.py, written by gradswitch.sim as `fault_schedule`), carried out in simulated time
// after the jobs' start, and what each did: a switch crash (it drops everything and loses its queues; back
// with its tables after the window), a switch hang (its process stopped: it forwards and answers nothing from
// the window's start until its release, if any; the control plane names it hung after SwitchHangDetectDelay,
// its heartbeat's bound, and routes around it as around a dead one), a link down or flapping (both directions drop), a worker crash (its
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
class NrSwitchJob;

/// A NetReduce job that aggregates on a switch without a worker attached to it: it falls back to ring when
/// that switch dies and returns to it once it is back.
struct NetReduceJobOn
{
    uint32_t job = 0;                // the NetReduce job (a graph's all-reduce job, or the job itself)
    std::vector<JobNode*> workers;   // by rank (nullptr: on another MPI rank)
    std::vector<NrSwitchJob*> cells; // its aggregation on every switch of its tree (cleared for the return)
};

/// What faults act on: the simulation's network and its job nodes.
struct FaultNetwork
{
    const Topology* topo = nullptr;
    const std::vector<Ptr<GsHost>>* hosts = nullptr;    // by host index
    const std::vector<Ptr<GsSwitch>>* switches = nullptr; // by switch index - hosts
    std::function<JobNode*(uint32_t jobId, uint32_t node)> node; // a job node on this rank (nullptr: elsewhere)
    /// The NetReduce jobs that aggregate on switch `sw` without a worker attached to it.
    std::function<std::vector<NetReduceJobOn>(uint32_t sw)> netReduceJobsOn;
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
    /// Workers that each do one thing once (their first reduction on a new path), and when the last did.
    struct WorkersDone
    {
        uint32_t workers = 0;
        uint32_t done = 0;
        int64_t at = -1; // -1: not every one yet
    };

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
        // a NetReduce job's fallback to ring (a switch crash): when its workers agreed (-1: none), how many
        // jobs fell back, and when every one of their workers had completed a reduction on the ring
        int64_t fallback = -1;
        uint32_t fallbackJobs = 0;
        WorkersDone onRing;
        // the return to the restarted switch: when the workers agreed (-1: never), and when every one of them
        // had completed a reduction on the switch again
        int64_t returned = -1;
        WorkersDone backOnSwitch;
    };

    /// One more worker of `WorkersDone` member `which` of fault f's record: the callback it calls when done.
    std::function<void()> OneMore(size_t f, WorkersDone Record::*which);

    void Down(size_t f, uint32_t window);
    void Up(size_t f, uint32_t window);
    void Detect(size_t f, uint32_t window);
    void DetectUp(size_t f, uint32_t window);
    void Worker(size_t f);
    /// A switch crash or hang: the switch is out (forwards nothing) during its windows.
    bool IsSwitchFault(size_t f) const;
    /// The NetReduce jobs aggregating on a crashed switch: agree on the first unfinished reduction (computed
    /// here at once; what it would cost the workers, one round trip, passes before they act) and fall back.
    void FallBack(size_t f);
    void FallBackNow(size_t f, std::vector<JobNode*> workers, uint64_t from);
    /// The crashed switch is back: the jobs that fell back agree on the next reduction one of them will start
    /// (one round trip later), their switches' cells are cleared, and they return to the switch from it.
    void Return(size_t f);
    void ReturnNow(size_t f, NetReduceJobOn job);
    /// The largest smoothed round trip (else RTO) of the job's queue pairs to their next rank.
    static double JobRtt(const NetReduceJobOn& job);
    /// The ports of a link fault's two ends.
    std::pair<GsDevice*, GsDevice*> LinkDevices(const FaultSpec& spec) const;
    GsDevice* DeviceTo(uint32_t node, uint32_t peer) const;
    uint64_t LostPackets(size_t f) const;

    Time m_switchDetect;
    Time m_switchHangDetect;
    Time m_linkDetect;
    Time m_agreement; // FallbackAgreementDelay (zero: one round trip of the job's queue pairs)
    std::vector<FaultSpec> m_faults;
    std::vector<Record> m_records;
    FaultNetwork m_net;
    std::unique_ptr<Rerouter> m_rerouter;
    std::unordered_map<const RcQp*, size_t> m_stalled; // a stalled queue pair: the fault it is put down to
};

} // namespace gs
} // namespace ns3

#endif
