// NetReduce worker (gradswitch/hosts/netreduce.py): the gradient in messages of AGG_PACKETS_PER_MESSAGE packets of
// AGG_ELEMENTS_PER_PACKET int32 on the QP to rank + 1; the switches sum every worker's message k and
// deliver the sum on every connection, so the result comes on the QP from rank - 1. Message numbers run
// on over reductions and iterations in start order (the same on every worker), messages are posted in
// number order, and credits: message k + C only once the result of k is here and k is acknowledged.
// When the job's aggregating switch dies (gs-fault-schedule.h), the workers agree on the first reduction
// one of them has not finished and redo it and every later one with ring all-reduce (gs-ring.cc, in the
// reverse direction on the halves of the job's queue pairs NetReduce leaves unused, as gradswitch/hosts/fallback.py
// does on BMv2): the contribution half is parked, every sum checked as before. When the switch is back (its
// cells and those of the job's other switches empty), they agree on the next reduction one of them will start
// and return to the switch from it: the contribution half restarts at that reduction's first PSN.
// A graph job's world all-reduces (gs-graph-rank.h) run on such a worker too: its own NetReduce job id and queue
// pairs (JobNode::NetReduceQp), its reductions started by the graph's nodes in the same order on every rank. So
// do its reduce-scatters and all-gathers, each type on a worker of a switch job of its own (StartOwned,
// gradswitch/hosts/netreduce_scatter.py and netreduce_gather.py): every message names its owner above the window index
// of its RETH (config.p4 NR_OWNER_VA_SHIFT), an all-gather's placeholder goes as headers alone, and each
// message's copy, whole or trimmed, goes to the operation, which checks it. Credits are the all-reduce's.
#include "gs-collective.h"
#include "gs-constants.h"
#include "gs-job-node.h"
#include "gs-keys.h"

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
    NetReduceWorker(JobNode* node, uint32_t job)
        : Collective(node),
          m_n(node->Workers()),
          m_rank(node->NodeId()),
          m_credits(node->Job().credits)
    {
        // gradswitch/protocol/netreduce.py JobLayout: every connection of the job starts at this PSN
        m_initialPsn = (job * 0x10000 + 0x100) & 0xFFFFFF & ~(kAggPackets - 1);
        m_rkey = 0x4E520000 | job;
        m_send = node->NetReduceQp(job, (m_rank + 1) % m_n, m_initialPsn);
        m_recv = node->NetReduceQp(job, (m_rank + m_n - 1) % m_n, m_initialPsn);
    }

    void StartOwned(OwnedOperation op) override
    {
        // (a graph's operation: a graph runs no faults, so this worker never falls back to ring)
        auto owned = std::make_shared<OwnedOperation>(std::move(op));
        Op o{0, 0, 0, 0, m_nextK, owned->count, 0, WriteTag{}, owned->done, owned};
        m_nextK += owned->count;
        m_ops.emplace(o.firstK, std::move(o));
        TryPost();
    }

    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag, std::function<void()> done) override
    {
        uint64_t count = std::max<uint64_t>(1, (elements + kMessageElements - 1) / kMessageElements);
        Op o{it, op, seq, elements, m_nextK, count, 0, tag, std::move(done), nullptr};
        m_nextK += count;
        if (m_ring && o.firstK < m_switchFrom)
        {
            StartOnRing(std::move(o));
            return;
        }
        m_ops.emplace(o.firstK, std::move(o));
        TryPost();
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        if (m_ring && qp == m_send)
        {
            m_ring->OnRecv(qp, imm, std::move(data), zeroFilled);
            return;
        }
        if (m_ring && m_switchFrom == kNever)
        {
            return; // a result the switch sent before it died: the ring redoes its reduction
        }
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
        uint64_t mi = k - o.firstK;
        if (o.owned)
        {
            o.owned->arrived(mi, std::move(data), zeroFilled); // whole or trimmed: the operation checks which
        }
        else
        {
            if (zeroFilled)
            {
                m_node->AddZeroFilled(o.it, zeroFilled);
            }
            m_node->CheckResult(o.it, o.op, mi * kMessageElements, o.elements, mi << 32, *data);
        }
        o.received++;
        if (o.received == o.count)
        {
            Op done = std::move(o);
            m_ops.erase(it);
            m_finished.emplace(done.firstK, Finished{done.it, done.op, done.seq, done.elements, done.count, done.tag});
            Forget();
            if (!done.owned)
            {
                m_node->ReductionChecked(done.it);
            }
            if (m_firstSwitchDone)
            {
                auto f = std::move(m_firstSwitchDone);
                m_firstSwitchDone = nullptr;
                f();
            }
            done.done();
        }
        TryPost();
    }

    void OnSendComplete(RcQp* qp, uint64_t wrId) override
    {
        if (qp != m_send)
        {
            return; // the fallback ring's writes (on the QP to rank - 1)
        }
        m_acked.insert(wrId);
        TryPost();
    }

    void Report(nlohmann::json& out) const override
    {
        out[res::node::kNetreduce] = {{res::netreduce::kMessages, m_messages},
                                      {res::netreduce::kCreditWaits, m_creditWaits}};
        if (m_ring)
        {
            out[res::node::kNetreduce][res::netreduce::kFallback] = {
                {res::fallback::kFromMessage, m_fallbackFrom},
                {res::fallback::kRedone, m_redone},
                {res::fallback::kRingReductions, m_ringReductions},
                {res::fallback::kBackFromMessage,
                 m_switchFrom == kNever ? nlohmann::json(nullptr) : nlohmann::json(m_switchFrom)}};
        }
    }

    std::optional<uint64_t> FirstUnfinished() const override
    {
        return m_ops.empty() ? m_nextK : m_ops.begin()->first;
    }

    std::optional<uint64_t> NextMessage() const override
    {
        return m_nextK;
    }

    void ReturnToSwitch(uint64_t from, std::function<void()> firstSwitchDone) override
    {
        if (!m_ring || m_switchFrom != kNever || from < m_nextK)
        {
            return; // not on ring, back already, or past the agreed reduction (the agreement takes the largest)
        }
        m_switchFrom = from;
        m_firstSwitchDone = std::move(firstSwitchDone);
        uint32_t psn = (m_initialPsn + static_cast<uint32_t>(from * kAggPackets)) & 0xFFFFFF;
        m_send->RestartRequester(psn);
        m_recv->RestartResponder(psn);
        m_posted = from;
    }

    void FallBackToRing(uint64_t from, std::function<void()> firstRingDone) override
    {
        if (m_ring || m_n < 3)
        {
            return; // two workers have no ring distinct from their connections
        }
        m_fallbackFrom = from;
        m_firstRingDone = std::move(firstRingDone);
        m_send->ParkRequester();
        m_recv->SetNrContribution(false);
        // the reverse ring: rank r sends to r - 1 on its QP to it, receives from r + 1 on its QP to it
        m_ring = MakeRingOn(m_node, m_n - 1 - m_rank, m_recv, m_send);
        for (const auto& [k, f] : m_finished)
        {
            if (k >= from)
            {
                m_ring->Redo(f.it, f.op, f.seq, f.elements, f.tag);
                m_redone++;
            }
        }
        std::map<uint64_t, Op> pending = std::move(m_ops);
        m_ops.clear();
        for (auto& [k, o] : pending)
        {
            StartOnRing(std::move(o));
        }
    }

  private:
    struct Op
    {
        uint32_t it;
        uint32_t op;
        uint64_t seq;
        uint64_t elements;
        uint64_t firstK;
        uint64_t count;
        uint64_t received;
        WriteTag tag;
        std::function<void()> done;
        std::shared_ptr<OwnedOperation> owned; // a reduce-scatter or all-gather (null: a reduction)
    };

    /// A finished reduction, kept while another worker may not have finished it (the fallback redoes it).
    struct Finished
    {
        uint32_t it;
        uint32_t op;
        uint64_t seq;
        uint64_t elements;
        uint64_t count;
        WriteTag tag;
    };

    /// Drop finished reductions no worker can still lack: a worker posts message k only with the result of
    /// k - credits, and every message before this worker's first unfinished one was posted by all.
    void Forget()
    {
        uint64_t first = *FirstUnfinished();
        while (!m_finished.empty())
        {
            const auto& [k, f] = *m_finished.begin();
            if (k + f.count + m_credits > first)
            {
                return;
            }
            m_finished.erase(m_finished.begin());
        }
    }

    void StartOnRing(Op o)
    {
        auto done = std::move(o.done);
        m_ringReductions++;
        m_ring->Start(o.it, o.op, o.seq, o.elements, o.tag, [this, done = std::move(done)]() {
            if (m_firstRingDone)
            {
                auto f = std::move(m_firstRingDone);
                m_firstRingDone = nullptr;
                f();
            }
            done();
        });
    }

    bool Credit(uint64_t k) const
    {
        if (k < CreditBase() + m_credits)
        {
            return true;
        }
        uint64_t old = k - m_credits;
        auto wr = m_wrOf.find(old);
        return m_results.count(old) && wr != m_wrOf.end() && m_acked.count(wr->second);
    }

    void Release(uint64_t k)
    {
        if (k < CreditBase() + m_credits)
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
        while ((!m_ring || m_switchFrom != kNever) && m_posted < m_nextK)
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
            uint64_t window = k % m_credits + m_credits * ((k / m_credits) % 2);
            uint64_t va = window * kAggMessageBytes;
            MsgPtr data;
            WriteTag tag = o.tag;
            if (o.owned)
            {
                // gradswitch/protocol/netreduce.py JobLayout.owner_va: the owner's rank + 1 above the window index
                OwnedMessage msg = o.owned->message(mi);
                va |= static_cast<uint64_t>(msg.owner + 1) << kOwnerVaShift;
                tag.placeholder = msg.placeholder;
                data = msg.data ? msg.data
                                : MsgData::Make(kAggMessageBytes, kAggPacketBytes, m_send->Config().params->exact);
            }
            else
            {
                data = m_node->OwnData(o.it, o.op, mi * kMessageElements, kAggMessageBytes, o.elements, mi << 32);
            }
            m_wrOf[k] = m_send->PostWrite(data, va, m_rkey, k, tag);
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
    std::map<uint64_t, Finished> m_finished; // by first message
    // the fallback
    std::unique_ptr<RingPart> m_ring; // set: the job's reductions go round the ring
    std::function<void()> m_firstRingDone;
    uint64_t m_fallbackFrom = 0;
    uint64_t m_redone = 0;
    uint64_t m_ringReductions = 0;
    // the return: reductions from this message on go to the switch again
    static constexpr uint64_t kNever = UINT64_MAX;
    uint64_t m_switchFrom = kNever;
    std::function<void()> m_firstSwitchDone;

    /// The first message whose credit needs none returned (the first after the start or the return).
    uint64_t CreditBase() const
    {
        return m_switchFrom == kNever ? 0 : m_switchFrom;
    }
};

} // namespace

std::unique_ptr<Collective>
MakeNetReduceWorker(JobNode* node, uint32_t job)
{
    return std::make_unique<NetReduceWorker>(node, job);
}

} // namespace gs
} // namespace ns3
