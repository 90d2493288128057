// A job's workload as execution graphs (gradswitch/workload/graph.py JobGraph), as the configuration's job section
// `graph` carries it (gradswitch/sim/sim_config.py graph_json): per rank, compute and communication nodes with their
// dependencies; process groups by index. ParseGraph checks it like every other section (ConfigError, one line
// naming the rank, the node and the problem) and prepares what every rank's executor (gs-graph-rank.h) needs:
// dependencies as positions, each rank's nodes in gradswitch.workload.graph.topological_order's order, and the number
// every member gives the k-th collective of a group and the k-th message between two ranks with one tag.
#ifndef GS_GRAPH_SPEC_H
#define GS_GRAPH_SPEC_H

#include "gs-config-object.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

struct WriteTag; // gs-qp.h

enum class GraphNodeKind
{
    Compute,
    Collective,
    Send,
    Recv
};

/// gradswitch.workload.graph.CollectiveKind
enum class CollectiveKind
{
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAll,
    Broadcast
};

const char* CollectiveName(CollectiveKind k);

struct GraphNode
{
    uint64_t id{};                 // the trace's node id
    GraphNodeKind kind{};
    std::vector<uint32_t> deps;    // positions in the rank's nodes
    double durationS{};            // compute
    CollectiveKind collective{};   // collective
    uint32_t group{};              // collective: index of its process group
    uint64_t nbytes{};             // communication (gradswitch/workload/graph.py: the rank's input, all-gather its shard)
    uint32_t root{};               // broadcast: the root's global rank
    uint8_t layerClass{};          // collective: the DLCP layer class its writes carry (0: the top priority)
    bool droppable{};              // collective: DLCP may trim its packets (the job's policy decides which)
    uint32_t peer{};               // send: the receiver, recv: the sender (global ranks)
    uint64_t tag{};                // send/recv
    uint32_t sequence{};           // collective: k, its group's k-th; send/recv: the k-th with (peer, tag)
};

struct GraphGroup
{
    std::vector<uint32_t> ranks; // global ranks, in the group's order (ring order)
};

struct GraphRankSpec
{
    std::vector<GraphNode> nodes; // as the configuration lists them
    std::vector<uint32_t> order;  // positions, each after its dependencies (file order where free)
};

struct GraphSpec
{
    // a broadcast's chain cuts the buffer into ceil(bytes / chunk) chunks, at least 1 and at most maxChunks
    // (gradswitch/hosts/collectives/chain.py's rule, written by gradswitch.sim)
    uint64_t broadcastChunkBytes{};
    uint32_t broadcastMaxChunks{};
    // Fault injection for tests (`faults`, absent: none): this rank adds the first chunk it receives in a
    // reduction twice; the checks must catch it.
    std::optional<uint32_t> faultDoubleAddRank;
    // algo = netreduce (`netreduce`, absent: the hosts run every collective): every all-reduce, reduce-scatter
    // and all-gather of a world group runs through the switches, each type as a NetReduce job of its own (its
    // own queue pairs and switch cells, the job's credits; `job_id`, `reduce_scatter_job_id`,
    // `all_gather_job_id`, each absent where the graph has none), as gradswitch/hosts/collectives/in_network.py runs them
    // on BMv2; InNetworkJob says which.
    std::optional<uint32_t> netReduceJob; // all-reduce
    std::optional<uint32_t> scatterJob;   // reduce-scatter
    std::optional<uint32_t> gatherJob;    // all-gather
    // an all-gather's ranks send the messages other ranks own as placeholders (`placeholders`, absent: false: as
    // zeros, whole, as gradswitch/hosts/netreduce_gather.py does by default); and a what-if (`grow_placeholders`): the
    // switches can grow a placeholder into the owner's values, which BMv2 cannot (docs/netreduce.md,
    // "All-gather"), so one may complete its cell
    bool sendPlaceholders = false;
    bool growPlaceholders = false;
    // algo = ps (the job's server nodes, none: the hosts or the switches run every all-reduce): every all-reduce
    // of a world group runs through the job's parameter servers in keys of psKeyBytes, as
    // gradswitch/hosts/collectives/ps.py runs them on BMv2; RunsOnServers says which, PsKeys where each key goes.
    std::vector<uint32_t> servers; // node ids, after the ranks (from the job's nodes, not the graph section)
    uint64_t psKeyBytes{};
    std::vector<GraphGroup> groups;
    std::vector<GraphRankSpec> ranks; // by global rank = the job's worker node id
};

/// The NetReduce job of a collective type (none: the hosts run it).
std::optional<uint32_t> NetReduceJobOf(const GraphSpec& g, CollectiveKind k);

/// The NetReduce job that runs the node through the switches: an all-reduce, reduce-scatter or all-gather of a
/// group that holds every rank in rank order (a world group: a member's position is its NetReduce worker number
/// and a shard's owner its rank), in a graph with a NetReduce job for its type; none: the hosts run it.
std::optional<uint32_t> InNetworkJob(const GraphSpec& g, const GraphNode& n);

inline bool
RunsInNetwork(const GraphSpec& g, const GraphNode& n)
{
    return InNetworkJob(g, n).has_value();
}

/// The group holds every rank, in rank order.
bool IsWorld(const GraphSpec& g, uint32_t group);

/// The job's parameter servers run the node: an all-reduce of a world group, in a job with servers.
bool RunsOnServers(const GraphSpec& g, const GraphNode& n);

/// One key of an all-reduce through the parameter servers: its index (the step of its immediate data), its
/// elements [first, first + count) and its server's node id.
struct PsKey
{
    uint32_t index{};
    uint64_t first{};
    uint64_t count{};
    uint32_t server{};
};

/// The keys of node n (RunsOnServers): its elements cut into keys of psKeyBytes / 4 elements (at least 1), dealt
/// round robin to the servers from the node's sequence on (gradswitch/hosts/collectives/ps.py layout).
std::vector<PsKey> PsKeys(const GraphSpec& g, const GraphNode& n);

/// The immediate data of step `step` of group `group`'s k-th collective (a parameter server's key: its index).
uint64_t CollectiveImm(uint32_t group, uint32_t k, uint32_t step);

/// What a collective's writes carry for the marker (DLCP): its layer class, and whether its packets may be
/// droppable (the node's `droppable`: a training graph's all-reduces as the loop's ops; the job's policy marks
/// which), as gradswitch/hosts/collectives/ops.py Op.tag.
WriteTag TagOf(const GraphNode& n);

/// Parse and check a job's `graph` section for a job of `workers` workers (errors name the section's path).
GraphSpec ParseGraph(ConfigObject g, uint32_t workers);

} // namespace gs
} // namespace ns3

#endif
