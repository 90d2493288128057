// Ring all-reduce (gradswitch/hosts/ring.py): reduce-scatter then all-gather, 2(N-1) steps; rank r sends to r + 1
// and receives from r - 1; step s of reduction seq is an RDMA WRITE with immediate (seq, s) (64 bits here:
// no limit on workers or reductions). Each step's chunk waits for its predecessor's arrival, in order.
#include "gs-collective.h"
#include "gs-job-node.h"

#include <unordered_map>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kRingRkey = 0x52494E47; // "RING"

class Ring : public RingPart
{
  public:
    explicit Ring(JobNode* node)
        : RingPart(node),
          m_n(node->Workers()),
          m_rank(node->NodeId())
    {
        if (m_n > 1)
        {
            m_next = node->Qp((m_rank + 1) % m_n);
            m_prev = node->Qp((m_rank + m_n - 1) % m_n);
        }
    }

    Ring(JobNode* node, uint32_t rank, RcQp* next, RcQp* prev)
        : RingPart(node),
          m_n(node->Workers()),
          m_rank(rank),
          m_next(next),
          m_prev(prev)
    {
    }

    void Redo(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag) override
    {
        m_ops[seq].check = false;
        Start(it, op, seq, elements, tag, []() {});
    }

    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag, std::function<void()> done) override
    {
        Op& o = m_ops[seq];
        o.it = it;
        o.op = op;
        o.seq = seq;
        o.elements = elements;
        o.tag = tag;
        o.done = std::move(done);
        // chunk_bounds: N chunks, the first `extra` one element longer
        uint64_t base = elements / m_n;
        uint64_t extra = elements % m_n;
        uint64_t start = 0;
        for (uint32_t c = 0; c < m_n; c++)
        {
            uint64_t size = base + (c < extra ? 1 : 0);
            o.bounds.emplace_back(start, start + size);
            o.chunks.push_back(m_node->OwnData(it, op, start, size * 4, elements, static_cast<uint64_t>(c) << 32));
            start += size;
        }
        if (m_n == 1)
        {
            Complete(seq);
            return;
        }
        Send(o);
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        uint64_t seq = imm >> 16;
        m_arrived[imm] = std::move(data);
        auto it = m_ops.find(seq);
        if (zeroFilled && it != m_ops.end())
        {
            m_node->AddZeroFilled(it->second.it, zeroFilled);
        }
        if (it != m_ops.end() && Tag(seq, it->second.step) == imm)
        {
            Advance(it->second);
        }
    }

  private:
    struct Op
    {
        uint32_t it = 0;
        uint32_t op = 0;
        uint64_t seq = 0;
        uint64_t elements = 0;
        WriteTag tag;
        std::function<void()> done;
        std::vector<std::pair<uint64_t, uint64_t>> bounds;
        std::vector<MsgPtr> chunks; // this worker's running sum of every chunk
        uint32_t step = 0;
        bool check = true; // false: a reduction redone for the others (Redo)
    };

    static uint64_t Tag(uint64_t seq, uint32_t step)
    {
        return seq << 16 | step;
    }

    uint32_t Steps() const
    {
        return 2 * (m_n - 1);
    }

    void Send(Op& o)
    {
        uint32_t s = o.step;
        bool reduce = s < m_n - 1;
        uint32_t k = reduce ? s : s - (m_n - 1);
        uint32_t send = reduce ? (m_rank + m_n - k) % m_n : (m_rank + 1 + m_n - k) % m_n;
        // the chunk as it is now (a copy: later steps change this worker's sum)
        MsgPtr copy = std::make_shared<MsgData>(*o.chunks[send]);
        m_next->PostWrite(copy, 0, kRingRkey, Tag(o.seq, s), o.tag);
        if (m_arrived.count(Tag(o.seq, s)))
        {
            Advance(o);
        }
    }

    void Advance(Op& o)
    {
        uint64_t imm = Tag(o.seq, o.step);
        auto a = m_arrived.find(imm);
        MsgPtr got = a->second;
        m_arrived.erase(a);
        uint32_t s = o.step;
        bool reduce = s < m_n - 1;
        uint32_t k = reduce ? s : s - (m_n - 1);
        uint32_t recv = reduce ? (m_rank + 2 * m_n - k - 1) % m_n : (m_rank + m_n - k) % m_n;
        MsgData& mine = *o.chunks[recv];
        if (reduce)
        {
            for (size_t p = 0; p < mine.digest.size(); p++)
            {
                mine.digest[p] += got->digest[p];
                mine.lossy[p] |= got->lossy[p];
            }
            for (size_t i = 0; i < mine.values.size(); i++)
            {
                mine.values[i] = static_cast<int32_t>(static_cast<uint32_t>(mine.values[i]) +
                                                      static_cast<uint32_t>(got->values[i]));
            }
        }
        else
        {
            o.chunks[recv] = got;
        }
        o.step++;
        if (o.step == Steps())
        {
            Complete(o.seq);
            return;
        }
        Send(o);
    }

    void Complete(uint64_t seq)
    {
        auto it = m_ops.find(seq);
        Op o = std::move(it->second);
        m_ops.erase(it);
        if (!o.check)
        {
            return;
        }
        for (uint32_t c = 0; c < m_n; c++)
        {
            m_node->CheckResult(o.it, o.op, o.bounds[c].first, o.elements, static_cast<uint64_t>(c) << 32, *o.chunks[c]);
        }
        m_node->ReductionChecked(o.it);
        o.done();
    }

    uint32_t m_n;
    uint32_t m_rank;
    RcQp* m_next = nullptr;
    RcQp* m_prev = nullptr;
    std::unordered_map<uint64_t, Op> m_ops;
    std::unordered_map<uint64_t, MsgPtr> m_arrived;
};

} // namespace

std::unique_ptr<Collective>
MakeRing(JobNode* node)
{
    return std::make_unique<Ring>(node);
}

std::unique_ptr<RingPart>
MakeRingOn(JobNode* node, uint32_t rank, RcQp* next, RcQp* prev)
{
    return std::make_unique<Ring>(node, rank, next, prev);
}

} // namespace gs
} // namespace ns3
