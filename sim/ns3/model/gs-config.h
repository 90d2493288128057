// One run's configuration, as ns3sim (Python) writes it: the topology, the switches' and hosts' settings,
// the jobs with their transport, reductions or training plan, background traffic. The format is
// docs/simulator.md's "Configuration"; a bad value is a ConfigError naming it.
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include "gs-constants.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class ConfigError : public std::runtime_error
{
  public:
    using std::runtime_error::runtime_error;
};

struct WireSizes
{
    uint32_t roceOverhead = 58; // Ethernet, IPv4, UDP, BTH, ICRC (roce/wire.py ROCE_OVERHEAD)
    uint32_t reth = 16;
    uint32_t imm = 4;
    uint32_t aeth = 4;
    uint32_t sack = 4;
    uint32_t tcpOverhead = 66; // Ethernet, IPv4, TCP with timestamps
    uint32_t framing = 0;      // preamble, start delimiter, gap: 0 as the testbed's HTB counts a frame
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
    double rateBps = 1e9;
    double delayS = 1e-6;
    uint64_t queueBytes = 1 << 20;
    bool shaped = false; // a token-bucket shaper (the testbed's HTB on a veth), not a serializing wire
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
    double processingDelayS = 0.0; // per packet, before it joins its egress queue (BMv2's per-packet cost)
    // ECMP: member = ((CRC-16 of the flow key x multiplier) mod 2^32 >> 16) mod the group's size, as the P4
    // program's ECMP_MEMBER; ns3sim writes controller/routing.py hash_multiplier(ecmp_seed)
    uint32_t ecmpMultiplier = ECMP_PLAIN_MULTIPLIER;
    LoadBalance loadBalance = LoadBalance::Ecmp;
    double flowletGapS = 50e-3; // controller/routing.py DEFAULT_FLOWLET_GAP_US (ns3sim always writes it)
    bool roceClass = false;
    // Fault injection for tests: the first this many NetReduce contributions a switch accepts are added twice
    // (a switch that loses track of its bitmap): the results' check must catch it.
    uint32_t faultDoubleAdd = 0;
    // DLCP virtual-queue drop thresholds per switch name, bytes per priority (-1: never)
    std::map<std::string, std::vector<int64_t>> dlcpThresholds;
};

enum class Algo
{
    Ring,
    Ps,
    NetReduce,
    Write
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
    Mode mode = Mode::Gbn;
    uint32_t mtu = 1024;
    uint32_t window = 64;
    uint32_t ackEvery = 16;
    double rtoS = 0.05;
    double rtoMaxS = 1.0;
    uint32_t retryLimit = 7;
    double lossBudget = 0.0;
    double reorderDelayS = 0.0;
    bool orderTolerant = false;
};

struct ReductionSpec
{
    uint64_t elements = 0;
    uint32_t layerClass = 0; // DLCP layer class of its packets
    bool droppable = true;   // DLCP may drop its packets (exponent codes: never)
};

struct LayerSpec
{
    std::string name;
    double forwardS = 0;
    double backwardS = 0;
};

struct OpSpec
{
    uint64_t elements = 0;
    std::vector<uint32_t> layers; // layers whose gradients it carries (it starts once they exist)
    std::vector<uint32_t> deps;   // ops that must be complete first (exponent codes before values)
    uint32_t layerClass = 0;
    bool droppable = true;
};

enum class Sync
{
    Iteration,
    Layer
};

struct TrainingSpec
{
    double dilation = 1.0;
    Sync sync = Sync::Iteration;
    uint32_t inFlight = 4;
    std::vector<LayerSpec> layers;
    std::vector<OpSpec> ops;
};

struct DlcpSpec
{
    bool priority = false;
    bool drop = false;  // switches trim droppable packets over the threshold; hosts mark them
    bool spray = false;
    double lossBudget = 0.1;
    uint32_t dropMinLayerClass = 4;
    uint32_t dropMaxMagnitudeClass = 1;
    double maxRelativeError = 0.2;
};

enum class Role
{
    Worker,
    Server
};

struct NodeSpec
{
    uint32_t nodeId = 0;
    Role role = Role::Worker;
    std::string host;
};

struct JobSpec
{
    uint32_t jobId = 1;
    Algo algo = Algo::Ring;
    Check check = Check::Exact;
    uint64_t seed = 1;
    std::vector<NodeSpec> nodes; // workers first, in rank order
    uint32_t iterations = 1;
    TransportSpec transport;
    std::vector<ReductionSpec> reductions; // the all-reduce loop (no training)
    std::optional<TrainingSpec> training;
    uint64_t psKeyBytes = 64 << 10;
    uint32_t credits = 4;
    std::optional<DlcpSpec> dlcp;
    double iterationTimeoutS = 120.0;
    std::optional<std::pair<uint32_t, uint32_t>> crash; // (node, after iteration): the node dies (fault injection)
};

struct BackgroundSpec
{
    std::string sender;
    std::string receiver;
    uint32_t flows = 1;
    uint32_t mss = 1024;
    uint64_t rwndBytes = 6 << 20;
    double minRtoS = 0.2;
};

struct TensorLightsSpec
{
    std::string host;
    double rotateS = 0.0;
    std::vector<std::pair<uint32_t, uint32_t>> servers; // (job, node), favoured first
};

/// A flow to route through one switch without running anything (gradswitch-sim --tables, for tests).
struct EcmpProbe
{
    std::string sw;
    std::string src; // host names
    std::string dst;
    uint32_t protocol = IP_PROTO_UDP;
    uint32_t sport = 0;
    uint32_t dport = 0;
};

enum class MpiSync
{
    Barrier,     // ns3::DistributedSimulatorImpl: every rank waits at a global barrier once per lookahead window
    NullMessage, // ns3::NullMessageSimulatorImpl: neighbouring ranks exchange null messages (Chandy-Misra-Bryant)
};

/// Distributing the run over MPI ranks (docs/simulator.md "Distributed over MPI ranks"): every rank
/// builds the whole topology; a node is simulated (its applications, its switch state) only on its rank.
struct MpiSpec
{
    uint32_t ranks = 1;
    MpiSync sync = MpiSync::Barrier;
    std::map<std::string, uint32_t> rankOf; // every host and switch by name
};

struct RunConfig
{
    uint64_t seed = 1;
    double timeLimitS = 600.0;
    double progressS = 0.0;
    std::string scheduler = "ns3::PriorityQueueScheduler"; // ns-3's event list implementation
    WireSizes wire;
    TopologySpec topology;
    SwitchSettings switches;
    double hostMessageDelayS = 0.0;
    double lossFraction = 0.0;
    std::vector<std::string> lossHosts;
    std::vector<JobSpec> jobs;
    std::optional<BackgroundSpec> background;
    std::optional<TensorLightsSpec> tensorlights;
    std::vector<EcmpProbe> ecmpProbes; // for tests: which port a switch routes these flows to (--tables)
    MpiSpec mpi;
};

/// Parse a run's configuration (JSON text); ConfigError names the bad value.
RunConfig ParseConfig(const std::string& text);

/// Parse a job's transport settings (a job's `transport` object; also gs-qp-script's scenarios), `path` naming
/// it in errors.
TransportSpec ParseTransport(const nlohmann::json& j, const std::string& path);

/// A file's whole text (a program's input document); ConfigError when it cannot be read.
std::string ReadTextFile(const std::string& path);

/// A program's output document: to `path`, or to stdout when it is empty; std::runtime_error when it cannot be
/// written.
void WriteJson(const nlohmann::json& doc, const std::string& path);

} // namespace gs
} // namespace ns3

#endif
