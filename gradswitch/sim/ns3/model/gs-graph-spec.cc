#include "gs-graph-spec.h"

#include "gs-constants.h"
#include "gs-keys.h"
#include "gs-qp.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

namespace ns3
{
namespace gs
{

const char*
CollectiveName(CollectiveKind k)
{
    switch (k)
    {
    case CollectiveKind::AllReduce:
        return "all_reduce";
    case CollectiveKind::ReduceScatter:
        return "reduce_scatter";
    case CollectiveKind::AllGather:
        return "all_gather";
    case CollectiveKind::AllToAll:
        return "all_to_all";
    case CollectiveKind::Broadcast:
        return "broadcast";
    }
    return "?";
}

std::optional<uint32_t>
NetReduceJobOf(const GraphSpec& g, CollectiveKind k)
{
    switch (k)
    {
    case CollectiveKind::AllReduce:
        return g.netReduceJob;
    case CollectiveKind::ReduceScatter:
        return g.scatterJob;
    case CollectiveKind::AllGather:
        return g.gatherJob;
    default:
        return std::nullopt;
    }
}

std::optional<uint32_t>
InNetworkJob(const GraphSpec& g, const GraphNode& n)
{
    if (n.kind != GraphNodeKind::Collective)
    {
        return std::nullopt;
    }
    std::optional<uint32_t> job = NetReduceJobOf(g, n.collective);
    if (!job)
    {
        return std::nullopt;
    }
    return IsWorld(g, n.group) ? job : std::nullopt;
}

bool
IsWorld(const GraphSpec& g, uint32_t group)
{
    const auto& members = g.groups[group].ranks;
    for (uint32_t i = 0; i < members.size(); i++)
    {
        if (members[i] != i)
        {
            return false;
        }
    }
    return members.size() == g.ranks.size();
}

bool
RunsOnServers(const GraphSpec& g, const GraphNode& n)
{
    return !g.servers.empty() && n.kind == GraphNodeKind::Collective && n.collective == CollectiveKind::AllReduce &&
           IsWorld(g, n.group);
}

uint64_t
CollectiveImm(uint32_t group, uint32_t k, uint32_t step)
{
    return static_cast<uint64_t>(group + 1) << 48 | static_cast<uint64_t>(k & 0xFFFFFF) << 24 | (step & 0xFFFFFF);
}

WriteTag
TagOf(const GraphNode& n)
{
    return WriteTag{n.layerClass, n.droppable};
}

std::vector<PsKey>
PsKeys(const GraphSpec& g, const GraphNode& n)
{
    uint64_t perKey = std::max<uint64_t>(1, g.psKeyBytes / 4);
    uint64_t elements = (n.nbytes + 3) / 4;
    std::vector<PsKey> keys;
    for (uint64_t first = 0; first < elements; first += perKey)
    {
        auto index = static_cast<uint32_t>(keys.size());
        keys.push_back(PsKey{index, first, std::min(perKey, elements - first),
                             g.servers[(n.sequence + index) % g.servers.size()]});
    }
    return keys;
}

namespace
{

/// Positions in file order, each after its dependencies (gradswitch/workload/graph.py topological_order: Kahn's, the
/// earliest ready node first); ConfigError naming the first node of a cycle.
std::vector<uint32_t>
Order(const GraphRankSpec& r, const std::string& where)
{
    size_t n = r.nodes.size();
    std::vector<uint32_t> waiting(n, 0);
    std::vector<std::vector<uint32_t>> users(n);
    for (uint32_t i = 0; i < n; i++)
    {
        std::vector<uint32_t> deps = r.nodes[i].deps; // each once (a node may name one twice)
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        waiting[i] = static_cast<uint32_t>(deps.size());
        for (uint32_t d : deps)
        {
            users[d].push_back(i);
        }
    }
    std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
    for (uint32_t i = 0; i < n; i++)
    {
        if (waiting[i] == 0)
        {
            ready.push(i);
        }
    }
    std::vector<uint32_t> order;
    while (!ready.empty())
    {
        uint32_t i = ready.top();
        ready.pop();
        order.push_back(i);
        for (uint32_t u : users[i])
        {
            if (--waiting[u] == 0)
            {
                ready.push(u);
            }
        }
    }
    if (order.size() != n)
    {
        for (uint32_t i = 0; i < n; i++)
        {
            if (waiting[i] > 0)
            {
                throw ConfigError(where + ".nodes[" + std::to_string(i) + "] (node " + std::to_string(r.nodes[i].id) +
                                  "): its dependencies form a cycle");
            }
        }
    }
    return order;
}

/// The broadcast chain's chunking (`broadcast_chunk_bytes`, `broadcast_max_chunks`).
void
ParseBroadcast(ConfigObject& g, GraphSpec& spec)
{
    spec.broadcastChunkBytes = g.Get<uint64_t>(cfg::graph::kBroadcastChunkBytes);
    spec.broadcastMaxChunks = g.Get<uint32_t>(cfg::graph::kBroadcastMaxChunks);
    if (spec.broadcastChunkBytes == 0 || spec.broadcastMaxChunks == 0 || spec.broadcastMaxChunks >= (1u << 24))
    {
        throw ConfigError(g.Where(cfg::graph::kBroadcastChunkBytes) +
                          " and broadcast_max_chunks: at least 1 (chunks: below 2^24)");
    }
}

/// The optional `faults` section (fault injection for tests).
void
ParseFaults(ConfigObject& g, GraphSpec& spec)
{
    if (auto f = g.Section(cfg::graph::kFaults))
    {
        spec.faultDoubleAddRank = f->Get<uint32_t>(cfg::graph_faults::kDoubleAddRank);
        f->Finish();
    }
}

/// The optional `netreduce` section: the switch job of each collective type and the placeholders' options.
void
ParseNetReduce(ConfigObject& g, uint32_t workers, GraphSpec& spec)
{
    auto nr = g.Section(cfg::graph::kNetreduce);
    if (!nr)
    {
        return;
    }
    for (auto [key, slot] : {std::pair{cfg::graph_netreduce::kJobId, &spec.netReduceJob},
                             std::pair{cfg::graph_netreduce::kReduceScatterJobId, &spec.scatterJob},
                             std::pair{cfg::graph_netreduce::kAllGatherJobId, &spec.gatherJob}})
    {
        if (nr->Has(key))
        {
            *slot = nr->Get<uint32_t>(key);
        }
    }
    if (nr->Has(cfg::graph_netreduce::kPlaceholders))
    {
        spec.sendPlaceholders = nr->Get<bool>(cfg::graph_netreduce::kPlaceholders);
    }
    if (nr->Has(cfg::graph_netreduce::kGrowPlaceholders))
    {
        spec.growPlaceholders = nr->Get<bool>(cfg::graph_netreduce::kGrowPlaceholders);
    }
    nr->Finish();
    if (!spec.netReduceJob && !spec.scatterJob && !spec.gatherJob)
    {
        throw ConfigError(g.Where(cfg::graph::kNetreduce) + ": names no switch job: give job_id (all-reduce), "
                          "reduce_scatter_job_id or all_gather_job_id");
    }
    if ((spec.netReduceJob && (spec.netReduceJob == spec.scatterJob || spec.netReduceJob == spec.gatherJob)) ||
        (spec.scatterJob && spec.scatterJob == spec.gatherJob))
    {
        throw ConfigError(g.Where(cfg::graph::kNetreduce) + ": each collective type needs a switch job of its own (the "
                          "switch reads a message's owner one way per job)");
    }
    if (workers < 2)
    {
        throw ConfigError(g.Where(cfg::graph::kNetreduce) + ": NetReduce needs at least 2 workers, the job has " +
                          std::to_string(workers));
    }
}

/// The process groups (`groups`): each a non-empty list of distinct ranks of the job.
std::vector<GraphGroup>
ParseGroups(ConfigObject& g, uint32_t workers)
{
    std::vector<GraphGroup> groups;
    for (ConfigObject grp : g.Objects(cfg::graph::kGroups))
    {
        GraphGroup group;
        group.ranks = grp.Get<std::vector<uint32_t>>(cfg::group::kRanks);
        grp.Finish();
        if (group.ranks.empty())
        {
            throw ConfigError(grp.Where(cfg::group::kRanks) + ": a process group needs at least one rank");
        }
        std::set<uint32_t> seen;
        for (uint32_t r : group.ranks)
        {
            if (r >= workers)
            {
                throw ConfigError(grp.Where(cfg::group::kRanks) + ": rank " + std::to_string(r) +
                                  " is out of range (the job has ranks 0.." +
                                  std::to_string(workers - 1) + ")");
            }
            if (!seen.insert(r).second)
            {
                throw ConfigError(grp.Where(cfg::group::kRanks) + ": rank " + std::to_string(r) + " appears twice");
            }
        }
        groups.push_back(std::move(group));
    }
    return groups;
}

/// A node's place in errors: "<path>.nodes[i] (node <id>)".
std::string
NodeAt(const std::string& where, size_t i, uint64_t id)
{
    return where + ".nodes[" + std::to_string(i) + "] (node " + std::to_string(id) + ")";
}

/// The same from the node's object.
std::string
NodeAt(const ConfigObject& no, uint64_t id)
{
    return no.Path() + " (node " + std::to_string(id) + ")";
}

/// A computation's duration, or a communication's bytes.
void
ParseCost(ConfigObject& no, GraphNode& n)
{
    if (n.kind == GraphNodeKind::Compute)
    {
        n.durationS = no.Get<double>(cfg::graph_node::kDurationS);
        if (!(n.durationS >= 0) || !std::isfinite(n.durationS))
        {
            throw ConfigError(NodeAt(no, n.id) + ": duration_s = " + std::to_string(n.durationS) +
                              ": a computation takes 0 s or more");
        }
    }
    else
    {
        n.nbytes = no.Get<uint64_t>(cfg::graph_node::kNbytes);
        if (n.nbytes == 0)
        {
            throw ConfigError(NodeAt(no, n.id) + ": nbytes = 0: communication moves at least 1 byte");
        }
    }
}

/// What depends on the rank that runs node n (a rank given `same_as` another runs that one's nodes): a collective's
/// group holds the rank; a send's or receive's peer is another rank. `place()`: the node's place in errors.
template <typename Place>
void
CheckMember(uint32_t rank, const std::vector<GraphGroup>& groups, const GraphNode& n, const Place& place)
{
    const auto& members = groups[n.group].ranks;
    if (std::find(members.begin(), members.end(), rank) == members.end())
    {
        throw ConfigError(place() + ": rank " + std::to_string(rank) + " runs a collective of group " +
                          std::to_string(n.group) + ", which does not hold it");
    }
}

template <typename Place>
void
CheckPeer(uint32_t rank, uint32_t workers, const GraphNode& n, const Place& place)
{
    if (n.peer >= workers || n.peer == rank)
    {
        throw ConfigError(place() + ": peer rank " + std::to_string(n.peer) + " (the job has ranks 0.." +
                          std::to_string(workers - 1) + ", and a rank does not send to itself)");
    }
}

/// A collective's type, group, root and layer class; rank `rank` must be in its group (and a broadcast's root).
void
ParseCollective(ConfigObject& no, uint32_t rank, const std::vector<GraphGroup>& groups,
                GraphNode& n)
{
    static const std::map<std::string, CollectiveKind> kinds = {{"all_reduce", CollectiveKind::AllReduce},
                                                                {"reduce_scatter", CollectiveKind::ReduceScatter},
                                                                {"all_gather", CollectiveKind::AllGather},
                                                                {"all_to_all", CollectiveKind::AllToAll},
                                                                {"broadcast", CollectiveKind::Broadcast}};
    n.collective = no.Choice<CollectiveKind>(cfg::graph_node::kCollective, kinds);
    n.group = no.Get<uint32_t>(cfg::graph_node::kGroup);
    n.root = no.Get<uint32_t>(cfg::graph_node::kRoot);
    auto layer = no.Get<uint32_t>(cfg::graph_node::kLayerClass);
    if (layer >= kLayerClasses)
    {
        throw ConfigError(no.Where(cfg::graph_node::kLayerClass) + " = " + std::to_string(layer) +
                          ": DLCP's layer classes are 0 (the front layers) to " + std::to_string(kLayerClasses - 1));
    }
    n.layerClass = static_cast<uint8_t>(layer);
    n.droppable = no.Get<bool>(cfg::graph_node::kDroppable);
    if (n.group >= groups.size())
    {
        throw ConfigError(NodeAt(no, n.id) + ": group " + std::to_string(n.group) + " does not exist (groups 0.." +
                          std::to_string(groups.size()) + " - 1)");
    }
    CheckMember(rank, groups, n, [&no, &n] { return NodeAt(no, n.id); });
    const auto& members = groups[n.group].ranks;
    if (n.collective == CollectiveKind::Broadcast && std::find(members.begin(), members.end(), n.root) == members.end())
    {
        throw ConfigError(NodeAt(no, n.id) + ": broadcast root " + std::to_string(n.root) + " is not in group " +
                          std::to_string(n.group));
    }
}

/// A send's or receive's peer and tag; the peer is another rank of the job.
void
ParsePeer(ConfigObject& no, uint32_t rank, uint32_t workers, GraphNode& n)
{
    n.peer = no.Get<uint32_t>(cfg::graph_node::kPeer);
    n.tag = no.Get<uint64_t>(cfg::graph_node::kTag);
    CheckPeer(rank, workers, n, [&no, &n] { return NodeAt(no, n.id); });
}

/// One node of rank `rank`; its dependencies as the trace's ids go to `depIds`.
GraphNode
ParseNode(ConfigObject& no, uint32_t rank, uint32_t workers, const std::vector<GraphGroup>& groups,
          std::vector<uint64_t>& depIds)
{
    GraphNode n;
    n.id = no.Get<uint64_t>(cfg::graph_node::kId);
    // (built once: a graph has thousands of nodes per rank; a node's place in errors only when there is one)
    static const std::map<std::string, GraphNodeKind> kinds = {{"compute", GraphNodeKind::Compute},
                                                               {"collective", GraphNodeKind::Collective},
                                                               {"send", GraphNodeKind::Send},
                                                               {"recv", GraphNodeKind::Recv}};
    n.kind = no.Choice<GraphNodeKind>(cfg::graph_node::kKind, kinds);
    depIds = no.Get<std::vector<uint64_t>>(cfg::graph_node::kDeps);
    ParseCost(no, n);
    if (n.kind == GraphNodeKind::Collective)
    {
        ParseCollective(no, rank, groups, n);
    }
    if (n.kind == GraphNodeKind::Send || n.kind == GraphNodeKind::Recv)
    {
        ParsePeer(no, rank, workers, n);
    }
    no.Finish();
    return n;
}

/// Each node's dependencies as positions (`position`: by the trace's id), from the ids `depIds` (by position).
void
ResolveDeps(GraphRankSpec& r, const std::vector<std::vector<uint64_t>>& depIds,
            const std::unordered_map<uint64_t, uint32_t>& position, const std::string& where)
{
    for (size_t i = 0; i < r.nodes.size(); i++)
    {
        for (uint64_t d : depIds[i])
        {
            auto p = position.find(d);
            if (p == position.end())
            {
                throw ConfigError(NodeAt(where, i, r.nodes[i].id) + ": depends on node " + std::to_string(d) +
                                  ", which does not exist");
            }
            if (p->second == i)
            {
                throw ConfigError(NodeAt(where, i, r.nodes[i].id) + ": depends on itself");
            }
            r.nodes[i].deps.push_back(p->second);
        }
    }
}

/// Rank `rank`'s graph from its `nodes` (at `where`): its nodes, their dependencies as positions, and its order.
GraphRankSpec
ParseRank(std::vector<ConfigObject>& nodes, const std::string& where, uint32_t rank, uint32_t workers,
          const std::vector<GraphGroup>& groups)
{
    GraphRankSpec r;
    std::unordered_map<uint64_t, uint32_t> position;
    position.reserve(nodes.size());
    r.nodes.reserve(nodes.size());
    std::vector<std::vector<uint64_t>> depIds(nodes.size());
    for (ConfigObject& no : nodes)
    {
        GraphNode n = ParseNode(no, rank, workers, groups, depIds[r.nodes.size()]);
        if (!position.emplace(n.id, static_cast<uint32_t>(r.nodes.size())).second)
        {
            throw ConfigError(NodeAt(no, n.id) + ": the id appears twice");
        }
        r.nodes.push_back(std::move(n));
    }
    ResolveDeps(r, depIds, position, where);
    r.order = Order(r, where);
    return r;
}

/// Rank `rank`'s graph as rank `same`'s (`same_as`, an earlier rank: its nodes and their order), checked for this
/// rank (CheckMember, CheckPeer: their errors name the nodes at `where`, this rank's place).
GraphRankSpec
SameRank(const GraphSpec& spec, uint32_t same, const std::string& where, uint32_t rank, uint32_t workers)
{
    GraphRankSpec r = spec.ranks[same];
    for (size_t i = 0; i < r.nodes.size(); i++)
    {
        const GraphNode& n = r.nodes[i];
        auto place = [&where, i, &n] { return NodeAt(where, i, n.id); };
        if (n.kind == GraphNodeKind::Collective)
        {
            CheckMember(rank, spec.groups, n, place);
        }
        else if (n.kind == GraphNodeKind::Send || n.kind == GraphNodeKind::Recv)
        {
            CheckPeer(rank, workers, n, place);
        }
    }
    return r;
}

/// Rank `rank`'s graph (`ranks[rank]`, at `where`): its own `nodes`, or `same_as` an earlier rank's (one of the two).
GraphRankSpec
RankOf(ConfigObject& ro, const GraphSpec& spec, const std::string& where, uint32_t rank, uint32_t workers)
{
    bool own = ro.Has(cfg::rank_graph::kNodes);
    if (own == ro.Has(cfg::rank_graph::kSameAs))
    {
        throw ConfigError(where + ": give its nodes or same_as (an earlier rank whose nodes it runs), " +
                          (own ? "not both" : "one of the two"));
    }
    if (own)
    {
        std::vector<ConfigObject> nodes = ro.OptionalObjects(cfg::rank_graph::kNodes);
        ro.Finish();
        return ParseRank(nodes, where, rank, workers, spec.groups);
    }
    auto same = ro.Get<uint32_t>(cfg::rank_graph::kSameAs);
    ro.Finish();
    if (same >= rank)
    {
        throw ConfigError(ro.Where(cfg::rank_graph::kSameAs) + " = " + std::to_string(same) +
                          ": the rank whose nodes this rank runs comes before it (below " + std::to_string(rank) +
                          ")");
    }
    return SameRank(spec, same, where + " (same_as " + std::to_string(same) + ")", rank, workers);
}

/// What every member must agree on: per group its collectives (kind, bytes, root) in order; per (src, dst, tag)
/// the sizes of the messages in order, from the sender and from the receiver. Each entry with the node's place.
struct Agreement
{
    using Sig = std::tuple<CollectiveKind, uint64_t, uint32_t>;
    using Messages = std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::vector<std::pair<uint64_t, std::string>>>;

    explicit Agreement(size_t groups)
        : sequences(groups)
    {
    }

    std::vector<std::map<uint32_t, std::vector<std::pair<Sig, std::string>>>> sequences; // per group, per rank
    Messages sends;
    Messages recvs;
};

/// Number rank `rank`'s collectives per group and its messages per (peer, tag) in its order, and record them.
void
NumberRank(GraphRankSpec& r, uint32_t rank, const std::string& where, Agreement& agreement)
{
    std::vector<uint32_t> groupCount(agreement.sequences.size(), 0);
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> sent;
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> received;
    for (uint32_t i : r.order)
    {
        GraphNode& n = r.nodes[i]; // (a computation, most of a graph's nodes, has no place to keep)
        if (n.kind == GraphNodeKind::Collective)
        {
            n.sequence = groupCount[n.group]++;
            agreement.sequences[n.group][rank].emplace_back(Agreement::Sig{n.collective, n.nbytes, n.root},
                                                             NodeAt(where, i, n.id));
        }
        else if (n.kind == GraphNodeKind::Send)
        {
            n.sequence = sent[{n.peer, n.tag}]++;
            agreement.sends[{rank, n.peer, n.tag}].emplace_back(n.nbytes, NodeAt(where, i, n.id));
        }
        else if (n.kind == GraphNodeKind::Recv)
        {
            n.sequence = received[{n.peer, n.tag}]++;
            agreement.recvs[{n.peer, rank, n.tag}].emplace_back(n.nbytes, NodeAt(where, i, n.id));
        }
    }
}

/// Every member of every group runs the same sequence of collectives.
void
CheckCollectivesAgree(const std::vector<GraphGroup>& groups, const Agreement& agreement)
{
    using Sequence = std::vector<std::pair<Agreement::Sig, std::string>>;
    for (size_t gi = 0; gi < groups.size(); gi++)
    {
        const auto& members = groups[gi].ranks;
        const auto& per = agreement.sequences[gi];
        if (per.empty())
        {
            continue;
        }
        static const Sequence none;
        auto of = [&per](uint32_t r) -> const Sequence& {
            auto it = per.find(r);
            return it == per.end() ? none : it->second;
        };
        const auto& ref = of(members[0]);
        for (uint32_t m : members)
        {
            const auto& mine = of(m);
            for (size_t k = 0; k < std::min(ref.size(), mine.size()); k++)
            {
                if (mine[k].first != ref[k].first)
                {
                    throw ConfigError(mine[k].second + ": collective " + std::to_string(k) + " of group " +
                                      std::to_string(gi) + " is " + CollectiveName(std::get<0>(mine[k].first)) + " of " +
                                      std::to_string(std::get<1>(mine[k].first)) + " bytes here and " +
                                      CollectiveName(std::get<0>(ref[k].first)) + " of " +
                                      std::to_string(std::get<1>(ref[k].first)) + " bytes on rank " +
                                      std::to_string(members[0]) + " (every member runs the same sequence)");
                }
            }
            if (mine.size() != ref.size())
            {
                const auto& longer = mine.size() > ref.size() ? mine : ref;
                throw ConfigError(longer[std::min(mine.size(), ref.size())].second + ": group " + std::to_string(gi) +
                                  " runs " + std::to_string(ref.size()) + " collectives on rank " +
                                  std::to_string(members[0]) + " and " + std::to_string(mine.size()) + " on rank " +
                                  std::to_string(m));
            }
        }
    }
}

/// Every send has its receive of the same size, in order, per (sender, receiver, tag).
void
CheckMessagesMatch(Agreement& agreement)
{
    std::set<std::tuple<uint32_t, uint32_t, uint64_t>> keys;
    for (const auto& [k, _] : agreement.sends)
    {
        keys.insert(k);
    }
    for (const auto& [k, _] : agreement.recvs)
    {
        keys.insert(k);
    }
    for (const auto& key : keys)
    {
        const auto& s = agreement.sends[key];
        const auto& v = agreement.recvs[key];
        for (size_t i = 0; i < std::min(s.size(), v.size()); i++)
        {
            if (s[i].first != v[i].first)
            {
                throw ConfigError(s[i].second + ": sends " + std::to_string(s[i].first) + " bytes to rank " +
                                  std::to_string(std::get<1>(key)) + " (tag " + std::to_string(std::get<2>(key)) +
                                  "), which receives " + std::to_string(v[i].first));
            }
        }
        if (s.size() != v.size())
        {
            const std::string& extra = s.size() > v.size() ? s[v.size()].second : v[s.size()].second;
            throw ConfigError(extra + ": no matching " +
                              (s.size() > v.size() ? "receive on rank " + std::to_string(std::get<1>(key))
                                                   : "send from rank " + std::to_string(std::get<0>(key))) +
                              " with tag " + std::to_string(std::get<2>(key)) + " (" + std::to_string(s.size()) +
                              " sends, " + std::to_string(v.size()) + " receives)");
        }
    }
}

} // namespace

GraphSpec
ParseGraph(ConfigObject g, uint32_t workers)
{
    GraphSpec spec;
    ParseBroadcast(g, spec);
    ParseFaults(g, spec);
    ParseNetReduce(g, workers, spec);
    spec.groups = ParseGroups(g, workers);
    std::vector<ConfigObject> ranks = g.Objects(cfg::graph::kRanks);
    if (ranks.size() != workers)
    {
        throw ConfigError(g.Where(cfg::graph::kRanks) + ": " + std::to_string(ranks.size()) +
                          " ranks' graphs for a job of " +
                          std::to_string(workers) + " workers (one graph per worker)");
    }
    Agreement agreement(spec.groups.size());
    for (uint32_t rank = 0; rank < workers; rank++)
    {
        std::string where = g.Where(cfg::graph::kRanks) + "[" + std::to_string(rank) + "]";
        GraphRankSpec r = RankOf(ranks[rank], spec, where, rank, workers);
        NumberRank(r, rank, where, agreement);
        spec.ranks.push_back(std::move(r));
    }
    g.Finish();
    CheckCollectivesAgree(spec.groups, agreement);
    CheckMessagesMatch(agreement);
    return spec;
}

} // namespace gs
} // namespace ns3
