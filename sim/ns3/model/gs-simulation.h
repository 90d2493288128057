// One run: builds the network and the jobs from a RunConfig, runs the simulator until every job node is
// done (or the simulated time limit), and returns the results (docs/simulator.md, "Results").
#ifndef GS_SIMULATION_H
#define GS_SIMULATION_H

#include "gs-config.h"
#include "gs-host.h"
#include "gs-job-node.h"
#include "gs-switch.h"
#include "gs-topology.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
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
    void NodeDone(size_t job, JobNode* node);
    void Progress();
    nlohmann::json SwitchResults() const;

    RunConfig m_c;
    std::unique_ptr<Topology> m_topo;
    std::vector<Ptr<GsHost>> m_hosts;        // by host index
    std::vector<Ptr<GsSwitch>> m_switches;   // by switch index - hosts
    std::vector<std::vector<std::unique_ptr<JobNode>>> m_nodes; // per job
    std::vector<AggregationTree> m_trees;    // per job (NetReduce), else empty
    std::unique_ptr<TcpBackground> m_background;
    size_t m_total = 0;
    size_t m_done = 0;
    std::chrono::steady_clock::time_point m_wallStart;
    std::chrono::steady_clock::time_point m_lastProgress;
    uint64_t m_lastEvents = 0;
};

} // namespace gs
} // namespace ns3

#endif
