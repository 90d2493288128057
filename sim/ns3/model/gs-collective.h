// An all-reduce algorithm of one job node (workers/ring.py, ps.py, netreduce.py): reductions start,
// packets move on the node's queue pairs, and each reduction ends with its result checked.
#ifndef GS_COLLECTIVE_H
#define GS_COLLECTIVE_H

#include "gs-message.h"
#include "gs-qp.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>

namespace ns3
{
namespace gs
{

class JobNode;

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

    /// The node's extra result fields (workers' `netreduce`, a server's `keys_served`).
    virtual void Report(nlohmann::json& out) const
    {
    }

  protected:
    JobNode* m_node;
};

std::unique_ptr<Collective> MakeRing(JobNode* node);
std::unique_ptr<Collective> MakeNetReduceWorker(JobNode* node);
std::unique_ptr<Collective> MakePsWorker(JobNode* node);
/// A parameter server: serves pushes by itself (Start is never called).
std::unique_ptr<Collective> MakePsServer(JobNode* node);
/// algo = write: worker 0 writes each reduction to worker 1 (the hand-computed link tests).
std::unique_ptr<Collective> MakeWrite(JobNode* node);
/// algo = graph: the node's rank of the job's execution graphs (gs-graph-rank.h).
std::unique_ptr<Collective> MakeGraphRank(JobNode* node);

} // namespace gs
} // namespace ns3

#endif
