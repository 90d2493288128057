// One worker or server of a job on a host (gradswitch/hosts/main.py's process): its queue pairs, its algorithm
// (gs-collective.h), and the loop that drives it: the all-reduce loop (gradswitch/hosts/loops.py WorkerLoop), the
// training iterations (gs-training.h), or serving (a parameter server). Every result is checked against
// the exact sum (`exact`: values) or the contributions' digests (`digest`), as a worker computes it
// itself from the job's generator.
#ifndef GS_JOB_NODE_H
#define GS_JOB_NODE_H

#include "gs-collective.h"
#include "gs-config.h"
#include "gs-generator.h"
#include "gs-host.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class TrainingScheduler;

/// What every node of a job shares, built once per job (a parameter server job has 2N nodes, each with N
/// queue pairs): its specification, where its nodes run, its queue pairs' parameters.
struct JobContext
{
    JobSpec job;
    std::vector<uint32_t> nodeHosts;          // by node id: the host index
    std::shared_ptr<const QpParams> qpParams; // with every host's name
    // a graph job whose world collectives run through the switches (JobSpec::NetReduceJobs): the queue pairs of
    // each of those NetReduce jobs (its id, the same transport); empty: none, or the job's own (algo netreduce)
    std::vector<std::shared_ptr<const QpParams>> nrQpParams;
};

/// One iteration's check (gradswitch/workload/encoding.py IterationCheck).
struct IterationCheck
{
    uint64_t wrong = 0;       // wrong elements (digest: elements of blocks whose digest is wrong)
    uint64_t checked = 0;     // reductions checked
    uint64_t blocks = 0;      // packets' worth of the result checked
    uint64_t lossyBlocks = 0; // of which hold a zero-filled contribution
    double diff2 = 0;         // exact: squared error and norm of the sums
    double norm2 = 0;
    uint64_t zeroFilled = 0;  // packets this node received as zeros
};

struct IterationRecord
{
    uint32_t index = 0;
    double start = 0;
    double end = 0;
    IterationCheck check;
};

class JobNode : public QpUser
{
  public:
    JobNode(GsHost* host, std::shared_ptr<const JobContext> context, uint32_t nodeId,
            std::function<void(JobNode*)> onDone);
    ~JobNode() override;

    /// Set up queue pairs (before the simulation starts).
    void Setup();
    /// The runner's go, at time 0.
    void Start();
    /// Another node of the job failed: stop.
    void Abort(const std::string& reason);
    /// A worker-crash fault (gs-fault-schedule.h): the process dies now, as a crash after an iteration does.
    void CrashNow(const std::string& reason);
    /// A slow-worker fault: its computation from now on takes `factor` times as long (training jobs: the loop's
    /// and a graph's computations).
    void SetSlowdown(double factor);

    /// The slow-worker fault's factor now (1: none): a computation started now takes this many times as long.
    double Slowdown() const
    {
        return m_slowdown;
    }

    /// The job's fault injection: this node dies after iteration `it` if asked (gradswitch/workload/records.py
    /// crash_if_asked); true when it did.
    bool CrashIfAsked(uint32_t it);

    // ---- for the collectives ----
    const JobSpec& Job() const
    {
        return m_job;
    }

    uint32_t NodeId() const
    {
        return m_nodeId;
    }

    uint32_t Workers() const
    {
        return m_workers;
    }

    const Generator& Gen() const
    {
        return m_gen;
    }

    bool Exact() const
    {
        return m_job.check == Check::Exact;
    }

    /// The sum of every worker's rank factor (gs-generator.h): a block's expected digest is G * this.
    uint64_t RankSum() const
    {
        return m_rankSum;
    }

    GsHost* Host() const
    {
        return m_host;
    }

    /// Its algorithm (a NetReduce worker's fallback: gs-fault-schedule.h).
    Collective* Algorithm() const
    {
        return m_collective.get();
    }

    /// The QP to job node `peer` (created on first use; both directions start at initialPsn).
    RcQp* Qp(uint32_t peer, uint32_t initialPsn = 0, bool nrContribution = false);
    /// The QP to job node `peer` of a NetReduce worker (gs-netreduce-worker.cc) of NetReduce job `job`, its data
    /// packets NetReduce contributions: the job's own QP (algo netreduce), or one of a graph's switch job
    /// (JobSpec::NetReduceJobs), beside the graph's own QP to the same peer.
    RcQp* NetReduceQp(uint32_t job, uint32_t peer, uint32_t initialPsn);
    /// This worker's own data: `bytes` of reduction op of iteration it, packets of `mtu` bytes, elements
    /// from `first` (zero beyond `elements`), digests of blocks `blockBase | packet`.
    MsgPtr OwnData(uint32_t it, uint32_t op, uint64_t first, uint64_t bytes, uint64_t elements, uint64_t blockBase) const;
    /// Check a received result (the same layout as OwnData) against the sum of every worker's data.
    void CheckResult(uint32_t it, uint32_t op, uint64_t first, uint64_t elements, uint64_t blockBase, const MsgData& got);
    void AddZeroFilled(uint32_t it, uint32_t packets);
    /// A reduction of iteration it is complete and checked.
    void ReductionChecked(uint32_t it);
    double Now() const;
    void Fail(const std::string& error);
    /// A server has served everything: done once its writes are acknowledged.
    void ServeDone();
    /// then() once every write the node posted is acknowledged (every queue pair idle); one at a time.
    void Drain(std::function<void()> then);
    IterationCheck& CheckOf(uint32_t it);

    // ---- results ----
    bool Done() const
    {
        return m_done;
    }

    const std::string& Error() const
    {
        return m_error;
    }

    bool Ok() const
    {
        return m_error.empty() && m_done;
    }

    nlohmann::json Result() const;
    /// Iterations finished (progress).
    uint32_t IterationsDone() const
    {
        return static_cast<uint32_t>(m_records.size());
    }

    // QpUser
    void OnSendComplete(RcQp* qp, uint64_t wrId) override;
    void OnRecvComplete(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override;
    void OnError(RcQp* qp, const std::string& error) override;

  private:
    void DispatchRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled);
    void DispatchSent(RcQp* qp, uint64_t wrId);
    void LoopIteration();
    void LoopNext();
    void CheckDrain();
    void Finish();
    /// The process is gone: its QPs neither send nor answer, and it reports no result of its own.
    void Die(const std::string& error);

    GsHost* m_host;
    std::shared_ptr<const JobContext> m_context;
    const JobSpec& m_job; // m_context->job
    uint32_t m_nodeId;
    Role m_role;
    uint32_t m_workers = 0;
    Generator m_gen;
    uint64_t m_rankSum = 0;
    std::function<void(JobNode*)> m_onDone;
    std::unique_ptr<Collective> m_collective;
    std::unique_ptr<TrainingScheduler> m_training;
    /// Create the QP in `slot` with these parameters, unless there is one.
    RcQp* QpIn(RcQp*& slot, const std::shared_ptr<const QpParams>& params, uint32_t peer, uint32_t initialPsn,
               bool nrContribution);

    std::vector<RcQp*> m_qps; // by peer node id, then (nrQpParams) each NetReduce job's by peer (null: none)
    std::map<uint32_t, IterationCheck> m_checks;
    std::vector<IterationRecord> m_records;
    bool m_done = false;
    bool m_started = false;
    double m_slowdown = 1.0; // the slow-worker fault's factor
    std::string m_error;
    std::function<void()> m_drained;
    // the all-reduce loop
    uint32_t m_it = 0;
    uint32_t m_next = 0;
    uint64_t m_seq = 0;
    double m_iterStart = 0;
};

} // namespace gs
} // namespace ns3

#endif
