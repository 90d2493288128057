// One run's configuration, as gradswitch.sim (Python) writes it: the topology, the switches' and hosts' settings,
// the jobs with their transport, reductions or training plan, background traffic. The format is
// docs/simulator.md's "Configuration"; a bad value is a ConfigError naming it. Every value is read from the
// document, which must give it (gradswitch/sim/sim_config.py writes every one): the members below have no defaults of
// their own but where a section is optional (absent: the feature is off, e.g. one MPI rank, no fault).
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include "gs-config-object.h"
#include "gs-constants.h"
#include "gs-graph-spec.h"
#include "gs-keys.h" // the configuration's keys and CONFIG_FORMAT (gradswitch/sim/sim_schema.py)

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

struct WireSizes
{
    uint32_t roceOverhead{}; // Ethernet, IPv4, UDP, BTH, ICRC (gradswitch/roce/wire.py ROCE_OVERHEAD)
    uint32_t reth{};
    uint32_t imm{};
    uint32_t aeth{};
    uint32_t sack{};
    uint32_t tcpOverhead{}; // Ethernet, IPv4, TCP with timestamps
    uint32_t framing{};     // preamble, start delimiter, gap: 0 as the testbed's HTB counts a frame
};

struct HostSpec
{
    std::string name;
    uint32_t ip = 0;
};

struct SwitchSpec
{
    std::string name;
    uint32_t deviceId = 0;
    std::string role;
};

struct LinkSpec
{
    std::string a;
    uint32_t aPort = 0;
    std::string b;
    uint32_t bPort = 0;
    double rateBps{};
    double delayS{};
    uint64_t queueBytes{};
    bool shaped{}; // a token-bucket shaper (the testbed's HTB on a veth), not a serializing wire
};

struct TopologySpec
{
    std::string name;
    std::vector<HostSpec> hosts;
    std::vector<SwitchSpec> switches;
    std::vector<LinkSpec> links;
};

enum class LoadBalance
{
    Ecmp,
    Flowlet
};

struct SwitchSettings
{
    double processingDelayS{}; // per packet, before it joins its egress queue (BMv2's per-packet cost)
    // ECMP: member = ((CRC-16 of the flow key x multiplier) mod 2^32 >> 16) mod the group's size, as the P4
    // program's ECMP_MEMBER; gradswitch.sim writes gradswitch/protocol/ecmp.py hash_multiplier(ecmp_seed)
    uint32_t ecmpMultiplier{};
    LoadBalance loadBalance{};
    double flowletGapS{}; // gradswitch.sim writes its SimSettings.flowlet_gap_us (gradswitch/protocol/ecmp.py DEFAULT_FLOWLET_GAP_US)
    bool roceClass{};
    // Fault injection for tests: the first this many NetReduce contributions a switch accepts are added twice
    // (a switch that loses track of its bitmap): the results' check must catch it. 0 without `faults`.
    uint32_t faultDoubleAdd = 0;
    // DLCP virtual-queue drop thresholds per switch name, bytes per priority (-1: never)
    std::map<std::string, std::vector<int64_t>> dlcpThresholds;
};

enum class Algo
{
    Ring,
    Ps,
    NetReduce,
    Write,
    Graph // the job's execution graphs (`graph`, gs-graph-rank.h)
};

enum class Check
{
    Exact,
    Digest,
    None
};

enum class Mode
{
    Gbn,
    Sr
};

struct TransportSpec
{
    Mode mode{};
    uint32_t mtu{};
    uint32_t window{};
    uint32_t ackEvery{};
    double rtoS{};
    double rtoMaxS{};
    uint32_t retryLimit{};
    double lossBudget{};
    double reorderDelayS{};
    bool orderTolerant{};
};

struct ReductionSpec
{
    uint64_t elements{};
    uint32_t layerClass{}; // DLCP layer class of its packets
    bool droppable{};      // DLCP may drop its packets (exponent codes: never)
};

struct LayerSpec
{
    std::string name;
    double forwardS{};
    double backwardS{};
};

struct OpSpec
{
    uint64_t elements{};
    std::vector<uint32_t> layers; // layers whose gradients it carries (it starts once they exist)
    std::vector<uint32_t> deps;   // ops that must be complete first (exponent codes before values)
    uint32_t layerClass{};
    bool droppable{};
};

enum class Sync
{
    Iteration,
    Layer
};

struct TrainingSpec
{
    double dilation{};
    Sync sync{};
    uint32_t inFlight{};
    std::vector<LayerSpec> layers;
    std::vector<OpSpec> ops;
};

struct DlcpSpec
{
    bool priority{};
    bool drop{}; // switches trim droppable packets over the threshold; hosts mark them
    bool spray{};
    double lossBudget{};
    uint32_t dropMinLayerClass{};
    uint32_t dropMaxMagnitudeClass{};
    double maxRelativeError{};
};

enum class Role
{
    Worker,
    Server
};

struct NodeSpec
{
    uint32_t nodeId{};
    Role role{};
    std::string host;
};

/// How a NetReduce job's switches read a message's owner (gradswitch/p4src/include/controls/netreduce_scatter.p4, set_job's
/// owners and gather): not at all (all-reduce), reduce-scatter (the sum whole to its owner alone) or all-gather
/// (the owner's values whole to every other member).
enum class NrOwners
{
    None,
    Scatter,
    Gather
};

/// One NetReduce job the switches keep cells for: its id and how it reads owners.
struct NetReduceJobRef
{
    uint32_t id{};
    NrOwners owners{};
};

struct JobSpec
{
    uint32_t jobId{};
    Algo algo{};
    Check check{};
    uint64_t seed{};
    std::vector<NodeSpec> nodes; // workers first, in rank order
    uint32_t iterations{};
    TransportSpec transport;
    std::vector<ReductionSpec> reductions; // the all-reduce loop (no training)
    std::optional<TrainingSpec> training;
    uint64_t psKeyBytes{};
    uint32_t credits{};
    std::optional<DlcpSpec> dlcp;
    double iterationTimeoutS{};
    std::optional<std::pair<uint32_t, uint32_t>> crash; // (node, after iteration): the node dies (fault injection)
    // a graph job's crash: the node (trace id) of the crashing rank whose computation's start ends iteration
    // `after` (the next iteration's first forward); it dies as that computation would start. None: it never does
    std::optional<uint64_t> crashGraphNode;
    std::shared_ptr<const GraphSpec> graph;             // algo graph: every worker's execution graph

    /// The NetReduce jobs whose cells the switches keep for this job: its own (algo netreduce), a graph's for its
    /// world all-reduces, reduce-scatters and all-gathers (GraphSpec::netReduceJob, scatterJob, gatherJob), none
    /// for the others.
    std::vector<NetReduceJobRef> NetReduceJobs() const
    {
        if (algo == Algo::NetReduce)
        {
            return {NetReduceJobRef{jobId, NrOwners::None}};
        }
        std::vector<NetReduceJobRef> out;
        if (graph)
        {
            for (auto [id, owners] : {std::pair{graph->netReduceJob, NrOwners::None},
                                      std::pair{graph->scatterJob, NrOwners::Scatter},
                                      std::pair{graph->gatherJob, NrOwners::Gather}})
            {
                if (id)
                {
                    out.push_back(NetReduceJobRef{*id, owners});
                }
            }
        }
        return out;
    }
};

struct BackgroundSpec
{
    std::string sender;
    std::string receiver;
    uint32_t flows{};
    uint32_t mss{};
    uint64_t rwndBytes{};
    double minRtoS{};
};

struct TensorLightsSpec
{
    std::string host;
    double rotateS{};
    std::vector<std::pair<uint32_t, uint32_t>> servers; // (job, node), favoured first
};

/// A flow to route through one switch without running anything (gradswitch-sim --tables, for tests).
struct EcmpProbe
{
    std::string sw;
    std::string src; // host names
    std::string dst;
    uint32_t protocol{};
    uint32_t sport{};
    uint32_t dport{};
};

enum class MpiSync
{
    Barrier,     // ns3::DistributedSimulatorImpl: every rank waits at a global barrier once per lookahead window
    NullMessage, // ns3::NullMessageSimulatorImpl: neighbouring ranks exchange null messages (Chandy-Misra-Bryant)
};

enum class FaultKind
{
    SwitchCrash, // the switch drops everything while out (its queues lost); back with its tables after the window
    SwitchHang,  // its process stopped: it forwards and answers nothing while out (what it queued is lost, as a
                 // crash's is); noticed by the control plane's heartbeat; back with its tables after the window
    LinkDown,    // both directions of the link drop while out (a flap is several windows)
    WorkerCrash, // the worker's process dies: its QPs neither send nor answer; its job stops (interrupted)
    SlowWorker,  // from at_s on, its computation takes `factor` times as long and/or its link runs at rate_bps
};

/// One fault of the run (gradswitch/topology/faults.py Fault, resolved by gradswitch.sim: its windows, the worker's node).
struct FaultSpec
{
    FaultKind kind{};
    std::string label; // the command line's form, for errors and results
    double atS{};      // simulated seconds after the jobs' start
    std::vector<std::pair<double, std::optional<double>>> windows; // switch, link: out from..to (none: for good)
    std::string sw;                 // switch-crash, switch-hang
    std::string a;                  // link faults: its two ends
    std::string b;
    uint32_t job{};                 // worker faults: the job and node id, and its host
    uint32_t node{};
    std::string host;
    double factor{};                // slow-worker: computation x factor
    std::optional<double> rateBps;  // slow-worker: the host's link cut to this rate (none: as it is)
};

/// The run's faults and how the control plane reacts (gs-fault-schedule.h; absent: no fault).
struct FaultScheduleSpec
{
    double switchDetectS{}; // a dead switch (its P4Runtime stream) noticed and routed around after this long
    double switchHangDetectS{}; // a hung switch (its heartbeat's deadlines missed) noticed and routed around
    double linkDetectS{};   // a dead link (port state) noticed and routed around after this long; also its return
    std::vector<FaultSpec> faults;
};

/// Distributing the run over MPI ranks (docs/simulator.md "Distributed over MPI ranks"): every rank
/// builds the whole topology; a node is simulated (its applications, its switch state) only on its rank.
struct MpiSpec
{
    uint32_t ranks = 1; // without `mpi`: one rank
    MpiSync sync = MpiSync::Barrier;
    std::map<std::string, uint32_t> rankOf; // every host and switch by name
};

struct RunConfig
{
    uint64_t seed{};
    double timeLimitS{};
    double progressS{};
    std::string scheduler; // ns-3's event list implementation
    WireSizes wire;
    TopologySpec topology;
    SwitchSettings switches;
    double hostMessageDelayS{};
    double lossFraction = 0.0; // without `loss`: none
    std::vector<std::string> lossHosts;
    std::vector<JobSpec> jobs;
    std::optional<BackgroundSpec> background;
    std::optional<TensorLightsSpec> tensorlights;
    std::vector<EcmpProbe> ecmpProbes; // for tests: which port a switch routes these flows to (--tables)
    MpiSpec mpi;
    std::optional<FaultScheduleSpec> faultSchedule; // without `fault_schedule`: no fault
};

/// Parse a run's configuration (JSON text); ConfigError names the bad value.
RunConfig ParseConfig(const std::string& text);

/// Parse a job's transport settings (a job's `transport` object; also gs-qp-script's scenarios).
TransportSpec ParseTransport(ConfigObject j);

/// Parse the header sizes (the configuration's `wire`; also gs-qp-script's scenarios).
WireSizes ParseWire(ConfigObject w);

/// A file's whole text (a program's input document); ConfigError when it cannot be read.
std::string ReadTextFile(const std::string& path);

/// A program's output document: to `path`, or to stdout when it is empty; std::runtime_error when it cannot be
/// written.
void WriteJson(const nlohmann::json& doc, const std::string& path);

} // namespace gs
} // namespace ns3

#endif
