// NetReduce worker (workers/netreduce.py): the gradient in messages of AGG_PACKETS_PER_MESSAGE packets of
// AGG_ELEMENTS_PER_PACKET int32 on the QP to rank + 1; the switches sum every worker's message k and
// deliver the sum on every connection, so the result comes on the QP from rank - 1. Message numbers run
// on over reductions and iterations in start order (the same on every worker), messages are posted in
// number order, and credits: message k + C only once the result of k is here and k is acknowledged.
#include "gs-collective.h"
#include "gs-constants.h"
#include "gs-job-node.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kMessageElements = kAggElements * kAggPackets;

class NetReduceWorker : public Collective
{
  public:
    explicit NetReduceWorker(JobNode* node)
        : Collective(node),
          m_n(node->Workers()),
          m_rank(node->NodeId()),
          m_credits(node->Job().credits)
    {
        uint32_t job = node->Job().jobId;
        // protocol/netreduce.py JobLayout: every connection of the job starts at this PSN
        m_initialPsn = (job * 0x10000 + 0x100) & 0xFFFFFF & ~(kAggPackets - 1);
        m_rkey = 0x4E520000 | job;
        m_send = node->Qp((m_rank + 1) % m_n, m_initialPsn, true);
        m_recv = node->Qp((m_rank + m_n - 1) % m_n, m_initialPsn, true);
    }

    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag, std::function<void()> done) override
    {
        uint64_t count = std::max<uint64_t>(1, (elements + kMessageElements - 1) / kMessageElements);
        Op o{it, op, elements, m_nextK, count, 0, tag, std::move(done)};
        m_ops.emplace(m_nextK, std::move(o));
        m_nextK += count;
        TryPost();
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        uint64_t k = imm;
        auto it = m_ops.upper_bound(k);
        if (it == m_ops.begin())
        {
            return;
        }
        --it;
        Op& o = it->second;
        if (k >= o.firstK + o.count || m_results.count(k))
        {
            return;
        }
        m_results.insert(k);
        if (zeroFilled)
        {
            m_node->AddZeroFilled(o.it, zeroFilled);
        }
        uint64_t mi = k - o.firstK;
        m_node->CheckResult(o.it, o.op, mi * kMessageElements, o.elements, mi << 32, *data);
        o.received++;
        if (o.received == o.count)
        {
            Op done = std::move(o);
            m_ops.erase(it);
            m_node->ReductionChecked(done.it);
            done.done();
        }
        TryPost();
    }

    void OnSendComplete(RcQp* qp, uint64_t wrId) override
    {
        m_acked.insert(wrId);
        TryPost();
    }

    void Report(nlohmann::json& out) const override
    {
        out["netreduce"] = {{"messages", m_messages}, {"credit_waits", m_creditWaits}};
    }

  private:
    struct Op
    {
        uint32_t it;
        uint32_t op;
        uint64_t elements;
        uint64_t firstK;
        uint64_t count;
        uint64_t received;
        WriteTag tag;
        std::function<void()> done;
    };

    bool Credit(uint64_t k) const
    {
        if (k < m_credits)
        {
            return true;
        }
        uint64_t old = k - m_credits;
        auto wr = m_wrOf.find(old);
        return m_results.count(old) && wr != m_wrOf.end() && m_acked.count(wr->second);
    }

    void Release(uint64_t k)
    {
        if (k < m_credits)
        {
            return;
        }
        uint64_t old = k - m_credits;
        m_results.erase(old);
        auto wr = m_wrOf.find(old);
        if (wr != m_wrOf.end())
        {
            m_acked.erase(wr->second);
            m_wrOf.erase(wr);
        }
    }

    void TryPost()
    {
        while (m_posted < m_nextK)
        {
            if (!Credit(m_posted))
            {
                m_creditWaits++;
                return;
            }
            uint64_t k = m_posted;
            auto it = std::prev(m_ops.upper_bound(k));
            const Op& o = it->second;
            uint64_t mi = k - o.firstK;
            Release(k);
            MsgPtr data = m_node->OwnData(o.it, o.op, mi * kMessageElements, kAggMessageBytes, o.elements, mi << 32);
            uint64_t window = k % m_credits + m_credits * ((k / m_credits) % 2);
            m_wrOf[k] = m_send->PostWrite(data, window * kAggMessageBytes, m_rkey, k, o.tag);
            m_posted++;
            m_messages++;
        }
    }

    uint32_t m_n;
    uint32_t m_rank;
    uint32_t m_credits;
    uint32_t m_initialPsn;
    uint32_t m_rkey;
    RcQp* m_send;
    RcQp* m_recv;
    uint64_t m_nextK = 0;  // the next message number a reduction gets
    uint64_t m_posted = 0; // messages posted so far (in number order)
    std::map<uint64_t, Op> m_ops; // by first message
    std::unordered_map<uint64_t, uint64_t> m_wrOf;
    std::unordered_set<uint64_t> m_results;
    std::unordered_set<uint64_t> m_acked;
    uint64_t m_messages = 0;
    uint64_t m_creditWaits = 0;
};

} // namespace

std::unique_ptr<Collective>
MakeNetReduceWorker(JobNode* node)
{
    return std::make_unique<NetReduceWorker>(node);
}

} // namespace gs
} // namespace ns3
