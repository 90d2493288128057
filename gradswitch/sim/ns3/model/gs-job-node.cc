#include "gs-job-node.h"

#include "gs-graph-rank.h"
#include "gs-keys.h"
#include "gs-training.h"

#include "ns3/simulator.h"

#include <cmath>
#include <stdexcept>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

JobNode::JobNode(GsHost* host, std::shared_ptr<const JobContext> context, uint32_t nodeId,
                 std::function<void(JobNode*)> onDone)
    : m_host(host),
      m_context(std::move(context)),
      m_job(m_context->job),
      m_nodeId(nodeId),
      m_role(m_job.nodes[nodeId].role),
      m_onDone(std::move(onDone)),
      m_qps(m_job.nodes.size() * (1 + m_context->nrQpParams.size()), nullptr)
{
    for (const auto& n : m_job.nodes)
    {
        if (n.role == Role::Worker)
        {
            m_workers++;
        }
    }
    m_gen.seed = m_job.seed;
    m_gen.job = m_job.jobId;
    for (uint32_t r = 0; r < m_workers; r++)
    {
        m_rankSum += m_gen.RankFactor(r);
    }
}

JobNode::~JobNode() = default;

void
JobNode::Setup()
{
    switch (m_job.algo)
    {
    case Algo::Ring:
        m_collective = MakeRing(this);
        break;
    case Algo::NetReduce:
        m_collective = MakeNetReduceWorker(this, m_job.jobId);
        break;
    case Algo::Ps:
        m_collective = m_role == Role::Server ? MakePsServer(this) : MakePsWorker(this);
        break;
    case Algo::Write:
        m_collective = MakeWrite(this);
        break;
    case Algo::Graph:
        m_collective = m_role == Role::Server ? MakeGraphPsServer(this) : MakeGraphRank(this);
        break;
    }
    if (m_role == Role::Worker && m_job.training)
    {
        m_training = std::make_unique<TrainingScheduler>(this, m_collective.get(), *m_job.training, m_job.iterations);
        m_training->onIteration = [this](uint32_t it) { CrashIfAsked(it); };
    }
}

RcQp*
JobNode::Qp(uint32_t peer, uint32_t initialPsn, bool nrContribution)
{
    return QpIn(m_qps.at(peer), m_context->qpParams, peer, initialPsn, nrContribution);
}

RcQp*
JobNode::NetReduceQp(uint32_t job, uint32_t peer, uint32_t initialPsn)
{
    if (job == m_job.jobId)
    {
        return Qp(peer, initialPsn, true);
    }
    for (size_t k = 0; k < m_context->nrQpParams.size(); k++)
    {
        if (m_context->nrQpParams[k]->job == job)
        {
            return QpIn(m_qps.at(m_job.nodes.size() * (1 + k) + peer), m_context->nrQpParams[k], peer, initialPsn,
                        true);
        }
    }
    throw std::logic_error("job " + std::to_string(m_job.jobId) + " has no NetReduce job " + std::to_string(job));
}

RcQp*
JobNode::QpIn(RcQp*& slot, const std::shared_ptr<const QpParams>& params, uint32_t peer, uint32_t initialPsn,
              bool nrContribution)
{
    if (slot != nullptr)
    {
        return slot;
    }
    QpConfig cfg;
    cfg.params = params;
    cfg.localNode = m_nodeId;
    cfg.remoteNode = peer;
    cfg.localHost = m_context->nodeHosts[m_nodeId];
    cfg.remoteHost = m_context->nodeHosts[peer];
    cfg.initialPsn = initialPsn;
    cfg.remoteInitialPsn = initialPsn;
    cfg.nrContribution = nrContribution;
    slot = m_host->Qp(cfg);
    slot->user = this;
    return slot;
}

void
JobNode::OnRecvComplete(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled)
{
    m_host->Deliver([this, qp, imm, data, zeroFilled]() { DispatchRecv(qp, imm, data, zeroFilled); });
}

void
JobNode::OnSendComplete(RcQp* qp, uint64_t wrId)
{
    DispatchSent(qp, wrId);
}

void
JobNode::OnError(RcQp* qp, const std::string& error)
{
    Fail(error);
}

double
JobNode::Now() const
{
    return Simulator::Now().GetSeconds();
}

void
JobNode::DispatchRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled)
{
    if (m_done)
    {
        return;
    }
    m_collective->OnRecv(qp, imm, std::move(data), zeroFilled);
}

void
JobNode::DispatchSent(RcQp* qp, uint64_t wrId)
{
    if (m_done)
    {
        return;
    }
    m_collective->OnSendComplete(qp, wrId);
    CheckDrain();
}

MsgPtr
JobNode::OwnData(uint32_t it, uint32_t op, uint64_t first, uint64_t bytes, uint64_t elements, uint64_t blockBase) const
{
    uint32_t mtu = m_job.transport.mtu;
    MsgPtr m = MsgData::Make(bytes, mtu, Exact());
    if (m_job.check == Check::None)
    {
        return m;
    }
    uint32_t rank = m_nodeId;
    for (uint32_t p = 0; p < m->Packets(); p++)
    {
        m->digest[p] = m_gen.Digest(rank, it, op, blockBase | p);
    }
    if (Exact())
    {
        uint64_t count = bytes / 4;
        for (uint64_t i = 0; i < count; i++)
        {
            uint64_t e = first + i;
            m->values[i] = e < elements ? m_gen.Value(rank, it, op, e) : 0;
        }
    }
    return m;
}

IterationCheck&
JobNode::CheckOf(uint32_t it)
{
    return m_checks[it];
}

void
JobNode::ReductionChecked(uint32_t it)
{
    CheckOf(it).checked++;
}

void
JobNode::AddZeroFilled(uint32_t it, uint32_t packets)
{
    CheckOf(it).zeroFilled += packets;
}

void
JobNode::CheckResult(uint32_t it, uint32_t op, uint64_t first, uint64_t elements, uint64_t blockBase,
                     const MsgData& got)
{
    IterationCheck& c = CheckOf(it);
    if (m_job.check == Check::None)
    {
        return;
    }
    uint32_t perPacket = got.mtu / 4;
    for (uint32_t p = 0; p < got.Packets(); p++)
    {
        uint64_t lo = first + static_cast<uint64_t>(p) * perPacket;
        uint64_t hi = std::min<uint64_t>(elements, lo + got.PacketBytes(p) / 4);
        uint64_t n = hi > lo ? hi - lo : 0;
        c.blocks++;
        bool lossy = got.lossy[p] != 0;
        if (lossy)
        {
            c.lossyBlocks++;
        }
        if (!Exact())
        {
            uint64_t want = m_gen.BlockFactor(it, op, blockBase | p) * m_rankSum;
            if (got.digest[p] != want)
            {
                // a zero-filled contribution (lossy) is what DLCP allows; anything else is a wrong sum
                c.wrong += lossy ? 0 : std::max<uint64_t>(n, 1);
                c.diff2 += lossy ? static_cast<double>(n) : 0.0;
            }
            c.norm2 += static_cast<double>(n);
            continue;
        }
        const int32_t* v = got.PacketValues(p);
        for (uint64_t i = 0; i < n; i++)
        {
            uint64_t e = lo + i;
            uint32_t sum = 0;
            for (uint32_t r = 0; r < m_workers; r++)
            {
                sum += static_cast<uint32_t>(m_gen.Value(r, it, op, e));
            }
            int32_t want = static_cast<int32_t>(sum);
            if (v[i] != want)
            {
                c.wrong++;
            }
            double d = static_cast<double>(v[i]) - static_cast<double>(want);
            c.diff2 += d * d;
            c.norm2 += static_cast<double>(want) * static_cast<double>(want);
        }
    }
}

void
JobNode::Start()
{
    m_started = true;
    if (m_done)
    {
        return;
    }
    if (m_role == Role::Server)
    {
        // serves pushes as they come; done when every key of every iteration is served
        m_collective->Start(0, 0, 0, 0, WriteTag{}, [this]() { ServeDone(); });
        return;
    }
    if (m_training)
    {
        m_training->Run([this]() {
            for (uint32_t i = 0; i < m_training->Bounds().size(); i++)
            {
                IterationRecord r;
                r.index = i;
                r.start = m_training->Bounds()[i].first;
                r.end = m_training->Bounds()[i].second;
                r.check = CheckOf(i);
                m_records.push_back(r);
            }
            Drain([this]() { Finish(); });
        });
        return;
    }
    if (m_job.algo == Algo::Graph)
    {
        // the rank's whole graph is the job's one iteration
        m_collective->Start(0, 0, 0, 0, WriteTag{}, [this]() {
            IterationRecord r;
            r.start = 0;
            r.end = Now();
            r.check = CheckOf(0);
            m_records.push_back(r);
            Drain([this]() { Finish(); });
        });
        return;
    }
    m_it = 0;
    LoopIteration();
}

void
JobNode::LoopIteration()
{
    m_iterStart = Now();
    m_next = 0;
    LoopNext();
}

void
JobNode::LoopNext()
{
    if (m_done)
    {
        return;
    }
    if (m_next < m_job.reductions.size())
    {
        const ReductionSpec& r = m_job.reductions[m_next];
        uint32_t op = m_next;
        m_next++;
        m_collective->Start(m_it, op, m_seq++, r.elements, WriteTag{static_cast<uint8_t>(r.layerClass), r.droppable},
                            [this]() { LoopNext(); });
        return;
    }
    Drain([this]() {
        IterationRecord r;
        r.index = m_it;
        r.start = m_iterStart;
        r.end = Now();
        r.check = CheckOf(m_it);
        m_records.push_back(r);
        if (CrashIfAsked(m_it))
        {
            return;
        }
        m_it++;
        if (m_it < m_job.iterations)
        {
            LoopIteration();
        }
        else
        {
            Finish();
        }
    });
}

void
JobNode::Drain(std::function<void()> then)
{
    m_drained = std::move(then);
    CheckDrain();
}

void
JobNode::CheckDrain()
{
    if (!m_drained)
    {
        return;
    }
    for (RcQp* qp : m_qps)
    {
        if (qp != nullptr && !qp->Idle())
        {
            return;
        }
    }
    auto f = std::move(m_drained);
    m_drained = nullptr;
    f();
}

bool
JobNode::CrashIfAsked(uint32_t it)
{
    if (!m_job.crash || m_job.crash->first != m_nodeId || m_job.crash->second != it || m_done)
    {
        return false;
    }
    Die("crashed after iteration " + std::to_string(it) + " (fault injection)");
    return true;
}

void
JobNode::Die(const std::string& error)
{
    for (RcQp* qp : m_qps)
    {
        if (qp != nullptr)
        {
            qp->dead = true;
        }
    }
    m_error = error;
    m_done = true;
    m_onDone(this);
}

void
JobNode::CrashNow(const std::string& reason)
{
    if (m_done)
    {
        return;
    }
    Die(reason);
}

void
JobNode::SetSlowdown(double factor)
{
    m_slowdown = factor;
    if (m_training)
    {
        m_training->slowdown = factor;
    }
}

void
JobNode::ServeDone()
{
    Drain([this]() { Finish(); });
}

void
JobNode::Finish()
{
    if (m_done)
    {
        return;
    }
    m_done = true;
    m_onDone(this);
}

void
JobNode::Fail(const std::string& error)
{
    if (m_done)
    {
        return;
    }
    m_error = error;
    m_done = true;
    m_onDone(this);
}

void
JobNode::Abort(const std::string& reason)
{
    if (m_done)
    {
        return;
    }
    m_error = "stopped: " + reason;
    m_done = true;
}

json
JobNode::Result() const
{
    json out;
    out[res::node::kNodeId] = m_nodeId;
    out[res::node::kRole] = m_role == Role::Worker ? "worker" : "server";
    out[res::node::kHost] = m_context->qpParams->hostNames[m_context->nodeHosts[m_nodeId]];
    out[res::node::kOk] = Ok();
    if (!m_error.empty())
    {
        out[res::node::kError] = m_error;
    }
    else if (!m_done)
    {
        out[res::node::kError] = "did not finish within the simulated time limit";
    }
    size_t expected = m_job.training ? m_job.training->ops.size() : m_job.reductions.size();
    if (m_job.algo == Algo::Write && m_nodeId == 0)
    {
        expected = 0; // the sender checks nothing
    }
    if (m_job.graph)
    {
        expected = m_role == Role::Server ? 0 : GraphRank::CommunicationNodes(m_job.graph->ranks.at(m_nodeId));
    }
    std::vector<IterationRecord> records = m_records;
    if (m_training && records.empty())
    {
        // a run that stopped before its end (a worker crashed, the job was aborted): every iteration it completed,
        // each with all its reductions checked, is kept (as gradswitch/hosts/iteration.py TrainingLoop.records)
        const auto& bounds = m_training->Bounds();
        for (uint32_t i = 0; i < bounds.size(); i++)
        {
            auto found = m_checks.find(i);
            if (found == m_checks.end() || found->second.checked != expected)
            {
                continue;
            }
            IterationRecord r;
            r.index = i;
            r.start = bounds[i].first;
            r.end = bounds[i].second;
            r.check = found->second;
            records.push_back(r);
        }
    }
    json its = json::array();
    for (const auto& r : records)
    {
        const IterationCheck& c = r.check;
        double rel = c.norm2 > 0 ? std::sqrt(c.diff2 / c.norm2) : 0.0;
        bool lossyOk = m_job.dlcp && m_job.dlcp->drop && rel <= m_job.dlcp->maxRelativeError;
        bool correct = true;
        if (m_job.check == Check::Exact)
        {
            correct = c.checked == expected && (c.wrong == 0 || lossyOk);
        }
        else if (m_job.check == Check::Digest)
        {
            correct = c.checked == expected && c.wrong == 0 && (c.diff2 == 0 || lossyOk);
        }
        its.push_back({{res::iteration::kIndex, r.index},
                       {res::iteration::kStart, r.start},
                       {res::iteration::kEnd, r.end},
                       {res::iteration::kCorrect, correct},
                       {res::iteration::kWrongElements, c.wrong},
                       {res::iteration::kMaxAbsError, 0.0},
                       {res::iteration::kSaturated, 0},
                       {res::iteration::kZeroFilledPackets, c.zeroFilled},
                       {res::iteration::kRelativeError, rel},
                       {res::iteration::kChecked, c.checked},
                       {res::iteration::kBlocks, c.blocks},
                       {res::iteration::kLossyBlocks, c.lossyBlocks}});
    }
    out[res::node::kIterations] = its;
    if (m_training)
    {
        out[res::node::kTimeline] = m_training->Timeline();
        json bounds = json::array();
        for (const auto& [s, e] : m_training->Bounds())
        {
            bounds.push_back({s, e});
        }
        out[res::node::kBounds] = bounds;
    }
    // stats: as gradswitch/hosts/comm.py Comm.stats (bytes are IP bytes: the frame less its Ethernet header)
    uint64_t txP = 0;
    uint64_t txB = 0;
    uint64_t rxP = 0;
    uint64_t rxB = 0;
    std::map<std::string, uint64_t> req;
    std::map<std::string, uint64_t> resp;
    json rtt = json::object();
    for (const RcQp* qp : m_qps)
    {
        if (qp == nullptr)
        {
            continue;
        }
        txP += qp->txPackets;
        txB += qp->txBytes;
        rxP += qp->rxPackets;
        rxB += qp->rxBytes;
        for (const auto& [k, v] : qp->counters.Named(true))
        {
            req[k] += v;
        }
        for (const auto& [k, v] : qp->counters.Named(false))
        {
            resp[k] += v;
        }
        if (qp->Srtt() && rtt.find(qp->Peer()) == rtt.end()) // the job's own QP's, before a NetReduce job's
        {
            rtt[qp->Peer()] = {{res::rtt::kSrttMs, *qp->Srtt() * 1e3}, {res::rtt::kRtoMs, qp->Rto() * 1e3}};
        }
    }
    constexpr uint64_t eth = 14;
    out[res::node::kStats] = {{res::stats::kTxPackets, txP},
                    {res::stats::kTxBytes, txB - eth * txP},
                    {res::stats::kRxPackets, rxP},
                    {res::stats::kRxBytes, rxB - eth * rxP},
                    {res::stats::kDrops, json::object()},
                    {res::stats::kRequester, req},
                    {res::stats::kResponder, resp},
                    {res::stats::kRtt, rtt}};
    if (m_collective)
    {
        m_collective->Report(out);
    }
    return out;
}

} // namespace gs
} // namespace ns3
