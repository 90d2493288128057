// An all-reduce algorithm of one job node (gradswitch/hosts/ring.py, ps.py, netreduce.py): reductions start,
// packets move on the node's queue pairs, and each reduction ends with its result checked.
#ifndef GS_COLLECTIVE_H
#define GS_COLLECTIVE_H

#include "gs-message.h"
#include "gs-qp.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>

namespace ns3
{
namespace gs
{

class JobNode;

/// One message of a NetReduce reduce-scatter or all-gather (gradswitch/hosts/netreduce_scatter.py, netreduce_gather.py):
/// what this rank sends, one NetReduce message's bytes (null: zeros, an all-gather's message another rank owns),
/// whether it goes as a placeholder (its packets' headers alone, which the switches take as zeros; resent
/// whole), and the rank that owns its shard.
struct OwnedMessage
{
    MsgPtr data;
    bool placeholder = false;
    uint32_t owner = 0;
};

/// A NetReduce reduce-scatter or all-gather: its messages, made as they are posted, and the copy of each that
/// comes back to this rank (the values whole, or trimmed to headers: zeroFilled of its packets).
struct OwnedOperation
{
    uint64_t count = 0;
    std::function<OwnedMessage(uint64_t m)> message;
    std::function<void(uint64_t m, MsgPtr data, uint32_t zeroFilled)> arrived;
    std::function<void()> done; // every message's copy is here
};

class Collective
{
  public:
    explicit Collective(JobNode* node)
        : m_node(node)
    {
    }

    virtual ~Collective() = default;

    /// Reduce `elements` int32 values of reduction `op` of iteration `it`; `seq` numbers the job's
    /// reductions alike on every worker; done() once the result is here and checked.
    virtual void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag,
                       std::function<void()> done) = 0;
    virtual void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) = 0;

    virtual void OnSendComplete(RcQp* qp, uint64_t wrId)
    {
    }

    /// A NetReduce worker of a reduce-scatter's or all-gather's switch job: run the operation's messages, each
    /// naming its owner, in the same message numbering as Start's reductions. Other algorithms have none.
    virtual void StartOwned(OwnedOperation op)
    {
    }

    /// The node's extra result fields (workers' `netreduce`, a server's `keys_served`).
    virtual void Report(nlohmann::json& out) const
    {
    }

    /// NetReduce's fallback (gs-netreduce-worker.cc): the first message number of the first reduction this
    /// worker started and has not finished (the next one it will start if none); none for other algorithms.
    virtual std::optional<uint64_t> FirstUnfinished() const
    {
        return std::nullopt;
    }

    /// NetReduce's fallback: the aggregating switch is gone; redo every reduction from message number
    /// `from` (agreed by the job's workers) and every later one with ring all-reduce. `firstRingDone` is
    /// called once, when the first reduction the ring does completes here.
    virtual void FallBackToRing(uint64_t from, std::function<void()> firstRingDone)
    {
    }

    /// NetReduce's return: the message number the next reduction this worker starts will take.
    virtual std::optional<uint64_t> NextMessage() const
    {
        return std::nullopt;
    }

    /// NetReduce's return: the switch is back with its cells empty; every reduction from message number
    /// `from` (agreed: the largest NextMessage of the job's workers) goes to it again, the earlier ones finish
    /// on ring. `firstSwitchDone` is called once, when the first reduction back on the switch completes here.
    virtual void ReturnToSwitch(uint64_t from, std::function<void()> firstSwitchDone)
    {
    }

  protected:
    JobNode* m_node;
};

std::unique_ptr<Collective> MakeRing(JobNode* node);

/// Ring all-reduce as another algorithm's part (NetReduce's fallback): `rank` is this node's place on the
/// ring, `next` and `prev` its queue pairs to its neighbours; Redo takes part in a reduction this node has
/// finished already (its result not checked again, nothing called at the end).
class RingPart : public Collective
{
  public:
    using Collective::Collective;
    virtual void Redo(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag) = 0;
};

std::unique_ptr<RingPart> MakeRingOn(JobNode* node, uint32_t rank, RcQp* next, RcQp* prev);
/// A NetReduce worker of NetReduce job `job`: the node's own (algo netreduce), or a graph's switch job
/// (JobNode::NetReduceQp).
std::unique_ptr<Collective> MakeNetReduceWorker(JobNode* node, uint32_t job);
std::unique_ptr<Collective> MakePsWorker(JobNode* node);
/// A parameter server: serves pushes by itself (Start is never called).
std::unique_ptr<Collective> MakePsServer(JobNode* node);
/// algo = write: worker 0 writes each reduction to worker 1 (the hand-computed link tests).
std::unique_ptr<Collective> MakeWrite(JobNode* node);
/// algo = graph: the node's rank of the job's execution graphs (gs-graph-rank.h).
std::unique_ptr<Collective> MakeGraphRank(JobNode* node);
/// algo = graph with parameter servers: a server of the graph's world all-reduces (gs-graph-ps-server.cc).
std::unique_ptr<Collective> MakeGraphPsServer(JobNode* node);

} // namespace gs
} // namespace ns3

#endif
