// One run: builds the network and the jobs from a RunConfig, runs the simulator until every job node is
// done (or the simulated time limit), and returns the results (docs/simulator.md, "Results").
#ifndef GS_SIMULATION_H
#define GS_SIMULATION_H

#include "gs-config.h"
#include "gs-fault-schedule.h"
#include "gs-host.h"
#include "gs-job-node.h"
#include "gs-ranks.h"
#include "gs-switch.h"
#include "gs-topology.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class TcpBackground;

class Simulation
{
  public:
    explicit Simulation(RunConfig config);
    ~Simulation();

    /// Create nodes, links, tables and applications.
    void Build();
    /// Run to the end; the results document.
    nlohmann::json Run();
    /// Every switch's forwarding table and every NetReduce job's aggregation tree (for tests).
    nlohmann::json Tables() const;
    /// The port each of the configuration's ecmp_probes leaves its switch by (for tests).
    nlohmann::json Probes();

  private:
    void BuildLinks();
    void BuildSwitches();
    void BuildJobs();
    /// Job index j: its nodes' hosts, its switch jobs, its nodes on this rank (`names`: every node's name;
    /// `ids`: the job ids taken so far, its own and its switch jobs' added).
    void BuildJob(size_t j, const std::vector<std::string>& names, std::set<uint32_t>& ids);
    /// The host index of each of the job's nodes (by node id).
    std::vector<uint32_t> JobHosts(const JobSpec& job) const;
    /// A job with NetReduce jobs: NetReduce-sized packets, one worker per host.
    void CheckNetReduceJob(size_t j, const std::vector<uint32_t>& workerHosts) const;
    /// One NetReduce job of job index j: its aggregation tree and its state on this rank's switches.
    void BuildNetReduceJob(size_t j, const NetReduceJobRef& nrRef, const std::vector<uint32_t>& workerHosts,
                           std::set<uint32_t>& ids);
    /// A switch's state for a NetReduce job (its role in the tree) and its members' ports.
    void AddNetReduceSwitch(const JobSpec& job, const NetReduceJobRef& nrRef, const AggregationRole& role,
                            const std::vector<uint32_t>& workerHosts, const std::vector<uint32_t>& ranks);
    /// What the job's nodes share: the job, its hosts and its queue pairs' parameters.
    std::shared_ptr<const JobContext> MakeJobContext(const JobSpec& job, const std::vector<uint32_t>& nodeHosts,
                                                     const std::vector<NetReduceJobRef>& nrJobs,
                                                     const std::vector<std::string>& names) const;
    /// Job index j's nodes on this rank's hosts, set up.
    void CreateJobNodes(size_t j, const std::shared_ptr<const JobContext>& context);
    void BuildTensorLights();
    void BuildBackground();
    void BuildFaults();
    void NodeDone(size_t job, JobNode* node);
    /// Node `node` of job index `job` finished at `atTicks` (here, or on another rank: `local` false); a
    /// failure stops the job's other nodes on this rank. Every rank counts every node of every job.
    void Finished(size_t job, uint32_t node, int64_t atTicks, bool failed, const std::string& error, bool local);
    /// A control message from another rank (MPI): a node there finished.
    void Control(Ptr<Packet> p);
    void Progress();
    nlohmann::json SwitchResults() const;
    /// This rank's results (every rank's when one).
    nlohmann::json LocalResults(double wall, double simS) const;
    /// Rank 0: every rank's results as one document, as one rank writes it.
    nlohmann::json Merge(const std::vector<std::string>& ranks) const;

    RunConfig m_c;
    std::unique_ptr<Topology> m_topo;
    std::unique_ptr<Ranks> m_ranks;
    std::vector<Ptr<GsHost>> m_hosts;        // by host index
    std::vector<Ptr<GsSwitch>> m_switches;   // by switch index - hosts
    std::vector<std::vector<std::unique_ptr<JobNode>>> m_nodes; // per job: the nodes on this rank's hosts
    std::vector<std::vector<bool>> m_finished;                   // per job, per node id: done (on any rank)
    std::vector<Ptr<GsDevice>> m_cutDevices;                     // this rank's ends of links cut between ranks
    std::vector<std::map<uint32_t, AggregationTree>> m_trees; // per job: by NetReduce job id (none: empty)
    std::unique_ptr<TcpBackground> m_background;
    Ptr<FaultSchedule> m_faults; // the run's faults (null: none)
    size_t m_total = 0; // job nodes of every rank
    size_t m_done = 0;
    int64_t m_lastDoneTicks = 0;
    std::chrono::steady_clock::time_point m_wallStart;
    std::chrono::steady_clock::time_point m_lastProgress;
    uint64_t m_lastEvents = 0;
    double m_setupRssMb = 0; // peak memory once built, before the run
    double m_allgatherUs = 0; // what one barrier costs among the ranks (measured before the run)
};

} // namespace gs
} // namespace ns3

#endif
