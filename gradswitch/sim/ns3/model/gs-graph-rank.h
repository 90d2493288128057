// One rank's execution graph on the simulator's clock (docs/simulator.md "The graph engine"): a node starts
// when every node it depends on is done; a compute node occupies the rank's one GPU for its duration (one
// computation at a time, ready ones in the graph's order, as gradswitch/hosts/graph_engine.py); a collective runs on its
// process group's members with the algorithm a practitioner's library uses (ring all-reduce as reduce-scatter
// then all-gather, ring reduce-scatter, ring all-gather, all-to-all by pairwise exchange, broadcast as a
// pipelined chain from the root); send/recv is one RDMA WRITE. An operation ends when its output is complete (its
// last receive in; a send, or a broadcast's root, once its last write is posted), not when its writes are
// acknowledged (GraphRank::Completion), as a collective library's kernel. Several collectives may be in flight at once:
// every message's immediate names its operation (group, k-th collective, step; or tag and k-th message), so
// messages of different operations between the same two ranks share their queue pair without mixing.
// Every communication node's output is checked (gs-graph-data.h) and reported with its start and end.
// With algo = netreduce (GraphSpec::netReduceJob, scatterJob, gatherJob) every all-reduce, reduce-scatter and
// all-gather of a world group runs through the switches instead, each type on a NetReduce worker of its own
// switch job (gs-netreduce-worker.cc, on that job's queue pairs): an all-reduce's done() ends the node and the
// worker's own check of every message gives the node's; a reduce-scatter's or all-gather's messages
// (gradswitch/hosts/netreduce_scatter.py scatter_plan, netreduce_gather.py gather_plan) carry this rank's data, or a
// placeholder, and the node checks every copy that comes back: the values it must get whole and exact, the
// others trimmed. NetReduce numbers messages as operations start, so the rank starts a job's operations in the
// order of its topological order (the same on every rank): one that is ready before an earlier one of its job
// has started waits for it (gradswitch/hosts/collectives/in_network.py InNetworkJob).
// With algo = ps (GraphSpec::servers) every all-reduce of a world group runs through the job's parameter servers
// instead (gradswitch/hosts/collectives/ps.py): the rank pushes each key (PsKeys) to its server and the node ends once
// every key's sum is back and checked; the servers are GraphPsServer nodes.
// The other collectives, and those of smaller groups, stay on the hosts' algorithms.
// A worker's faults act on the rank as on the training loop's worker (gs-training.h): a slow worker's
// computations started from the fault on take its factor times as long (JobNode::Slowdown, StretchedTicks); a
// crash after iteration k (JobSpec::crash, crashGraphNode) kills the rank as its iteration k + 1's first forward
// would start; a worker-crash fault kills it at its time. A rank that stopped (died, or stopped by its job's
// failure) ends and starts nothing more: its report keeps the nodes it ended, and the start of the one it had
// started and not ended (end -1), as a stopped loop keeps the iterations it completed.
#ifndef GS_GRAPH_RANK_H
#define GS_GRAPH_RANK_H

#include "gs-collective.h"
#include "gs-graph-data.h"
#include "gs-graph-spec.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace ns3
{
namespace gs
{

class GraphRank : public Collective
{
  public:
    /// The job node's rank of the job's graph; creates the queue pairs its operations use.
    explicit GraphRank(JobNode* node);

    /// Run the rank's whole graph; done() once every node is done.
    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag,
               std::function<void()> done) override;
    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override;
    void OnSendComplete(RcQp* qp, uint64_t wrId) override;
    /// `graph`: per node (in the configuration's order) [id, start s, end s, checked (null: not checked: a
    /// computation, a send, a run without checks), zero-filled packets received, squared error and squared norm
    /// of its checked output (DLCP's loss: Loss)].
    void Report(nlohmann::json& out) const override;

    /// NetReduce's fallback to ring and return (gs-fault-schedule.h): those of the rank's worker of the graph's
    /// all-reduce switch job (its reduce-scatter and all-gather have none); none without one.
    std::optional<uint64_t> FirstUnfinished() const override;
    void FallBackToRing(uint64_t from, std::function<void()> firstRingDone) override;
    std::optional<uint64_t> NextMessage() const override;
    void ReturnToSwitch(uint64_t from, std::function<void()> firstSwitchDone) override;

    /// The nodes of a rank whose output is checked: collectives and receives (what its iteration's check counts).
    static uint32_t CommunicationNodes(const GraphRankSpec& r);

  private:
    using Done = std::function<void(bool)>; // the output held what the operation defines
    struct Completion;                       // when an operation ends (gs-graph-rank.cc)

    struct Record
    {
        double start = -1;
        double end = -1;
        std::optional<bool> checked;
        Loss loss; // DLCP: what zero-filled packets cost its output
    };

    /// The rank's worker of the graph's all-reduce switch job (nullptr: none).
    Collective* AllReduceWorker() const;
    void StartNode(uint32_t i);
    /// The GPU is free and a computation is ready: start the first in the graph's order.
    void NextCompute();
    void NodeDone(uint32_t i, bool ok);
    void RunCollective(const GraphNode& n, Done done);
    /// Node i, which runs through the switches: started by its job's NetReduce worker in its turn.
    void RunNetReduce(uint32_t i, Done done);
    /// A reduce-scatter's or all-gather's messages and their checks (node i's on its job's worker).
    OwnedOperation OwnedOf(const GraphNode& n, Done done);
    void RunRing(const GraphNode& n, Done done);
    /// An all-reduce through the parameter servers (RunsOnServers).
    void RunPs(const GraphNode& n, Done done);
    void RunAllToAll(const GraphNode& n, Done done);
    void RunBroadcast(const GraphNode& n, Done done);
    void RunSend(const GraphNode& n, Done done);
    void RunRecv(const GraphNode& n, Done done);

    /// Call f with the message `imm` from rank `peer` once it is here (at once if it is); its zero-filled packets
    /// count in `loss` (the receiving node's).
    void Expect(uint32_t peer, uint64_t imm, Loss* loss, std::function<void(MsgPtr)> f);
    /// Node n's loss record (n is one of this rank's nodes).
    Loss* LossOf(const GraphNode& n);
    /// Write m to rank `peer` with immediate `imm` (the queue pair keeps m until the write is acknowledged).
    void Post(uint32_t peer, MsgPtr m, uint64_t imm, WriteTag tag);
    /// Post a write of the operation `end`, with its tag (the operation's end does not wait for its acknowledgement).
    void PostOf(const std::shared_ptr<Completion>& end, uint32_t peer, MsgPtr m, uint64_t imm);

    static uint64_t MessageImm(uint64_t tag, uint32_t k);

    const GraphSpec& m_spec;
    uint32_t m_rank;
    const GraphRankSpec& m_me;
    GraphData m_data;
    uint32_t m_mtu;
    std::function<void()> m_done;
    std::vector<uint32_t> m_waiting;            // per node: dependencies not done yet
    std::vector<std::vector<uint32_t>> m_users; // per node: the nodes depending on it
    std::vector<Record> m_records;
    std::vector<uint32_t> m_position; // per node: its place in m_me.order
    std::set<uint32_t> m_readyCompute; // places of the computations waiting for the GPU
    bool m_gpuBusy = false;
    bool m_faulted = false; // the spec's fault injection happened
    static constexpr uint32_t kNoCrash = UINT32_MAX;
    // the node at which the crash's rank dies: a computation as it would start (it ends the iteration before),
    // or in a graph without computation its iteration's last collective as it ends
    uint32_t m_crashAt = kNoCrash;
    bool m_dying = false; // it crashes once its writes are acknowledged: it ends nothing more meanwhile
    uint32_t m_finished = 0;
    struct Arrival
    {
        MsgPtr data;
        uint32_t zeroFilled = 0; // of its packets, trimmed and taken as zeros here
    };
    struct Expectation
    {
        Loss* loss = nullptr;
        std::function<void(MsgPtr)> f;
    };
    std::map<std::pair<uint32_t, uint64_t>, Arrival> m_arrived;      // (peer, imm)
    std::map<std::pair<uint32_t, uint64_t>, Expectation> m_expected; // (peer, imm)
    // algo = netreduce: per switch job (by id)
    struct InNetwork
    {
        std::unique_ptr<Collective> worker;                // the rank's NetReduce worker of the job
        uint32_t started = 0;                              // operations started
        std::map<uint32_t, std::function<void()>> ready;   // by place: ready, waiting for an earlier one to start
    };
    static constexpr uint32_t kOnHosts = UINT32_MAX;
    std::map<uint32_t, InNetwork> m_inNetwork;
    std::vector<uint32_t> m_nrPlace; // per node: its place in its job's start order (kOnHosts: on the hosts)
    std::vector<uint32_t> m_nrJob;   // per node: its switch job
};


} // namespace gs
} // namespace ns3

#endif
