// Parameter server in PHub's spirit (gradswitch/hosts/ps.py): each reduction is cut into keys of ps_key_bytes, dealt
// round robin over the servers in order over every reduction of a step; a worker pushes every key of a
// reduction to its server (a WRITE with immediate (iteration, key)); a server with every worker's push
// of a key sums them and writes the sum to every worker (the pull).
#include "gs-collective.h"
#include "gs-job-node.h"
#include "gs-key-sums.h"
#include "gs-keys.h"
#include "gs-ticks.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kServerRkey = 0x50535256; // "PSRV"
constexpr uint32_t kWorkerRkey = 0x5053574B; // "PSWK"

struct Key
{
    uint32_t id;
    uint32_t unit;
    uint64_t lo;
    uint64_t hi;
    uint32_t server; // node id
};

struct Unit
{
    uint64_t elements;
    WriteTag tag;
};

std::vector<Unit>
UnitsOf(const JobSpec& job)
{
    std::vector<Unit> units;
    if (job.training)
    {
        for (const auto& op : job.training->ops)
        {
            units.push_back(Unit{op.elements, WriteTag{static_cast<uint8_t>(op.layerClass), op.droppable}});
        }
    }
    else
    {
        for (const auto& r : job.reductions)
        {
            units.push_back(Unit{r.elements, WriteTag{static_cast<uint8_t>(r.layerClass), r.droppable}});
        }
    }
    return units;
}

/// The job's keys: each unit cut into keys of ps_key_bytes, numbered in order over the units and dealt round
/// robin over the servers. A key is computed from its id, not listed: each of the job's nodes holds a plan.
class KeyPlan
{
  public:
    explicit KeyPlan(const JobSpec& job)
        : m_units(UnitsOf(job)),
          m_perKey(std::max<uint64_t>(1, job.psKeyBytes / 4))
    {
        for (const auto& n : job.nodes)
        {
            if (n.role == Role::Server)
            {
                m_servers.push_back(n.nodeId);
            }
        }
        m_first.push_back(0);
        for (const Unit& u : m_units)
        {
            uint64_t keys = (u.elements + m_perKey - 1) / m_perKey;
            m_first.push_back(m_first.back() + static_cast<uint32_t>(keys));
        }
    }

    const std::vector<Unit>& Units() const
    {
        return m_units;
    }

    /// Keys of every unit.
    uint32_t Count() const
    {
        return m_first.back();
    }

    /// The keys of unit u are [First(u), First(u + 1)).
    uint32_t First(uint32_t u) const
    {
        return m_first[u];
    }

    Key At(uint32_t id) const
    {
        uint32_t u = static_cast<uint32_t>(std::upper_bound(m_first.begin(), m_first.end(), id) - m_first.begin() - 1);
        uint64_t lo = static_cast<uint64_t>(id - m_first[u]) * m_perKey;
        return Key{id, u, lo, std::min(m_units[u].elements, lo + m_perKey), m_servers[id % m_servers.size()]};
    }

  private:
    std::vector<Unit> m_units;
    uint64_t m_perKey;
    std::vector<uint32_t> m_servers; // node ids
    std::vector<uint32_t> m_first;   // per unit its first key, and the number of keys
};

uint64_t
Tag(uint32_t it, uint32_t key)
{
    return (static_cast<uint64_t>(it) << 32) | key;
}

class PsWorker : public Collective
{
  public:
    explicit PsWorker(JobNode* node)
        : Collective(node),
          m_plan(node->Job())
    {
        for (uint32_t id = 0; id < m_plan.Count(); id++)
        {
            node->Qp(m_plan.At(id).server);
        }
    }

    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag, std::function<void()> done) override
    {
        Pending& p = m_pending[Tag(it, op)];
        p.left = m_plan.First(op + 1) - m_plan.First(op);
        p.done = std::move(done);
        if (p.left == 0)
        {
            Complete(it, op);
            return;
        }
        for (uint32_t id = m_plan.First(op); id < m_plan.First(op + 1); id++)
        {
            Key k = m_plan.At(id);
            MsgPtr data = m_node->OwnData(it, op, k.lo, (k.hi - k.lo) * 4, elements, static_cast<uint64_t>(id) << 32);
            m_node->Qp(k.server)->PostWrite(data, 0, kServerRkey, Tag(it, id), tag);
        }
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        uint32_t it = static_cast<uint32_t>(imm >> 32);
        uint32_t id = static_cast<uint32_t>(imm & 0xFFFFFFFF);
        if (id >= m_plan.Count())
        {
            return;
        }
        Key k = m_plan.At(id);
        auto p = m_pending.find(Tag(it, k.unit));
        if (p == m_pending.end())
        {
            return;
        }
        if (zeroFilled)
        {
            m_node->AddZeroFilled(it, zeroFilled);
        }
        m_node->CheckResult(it, k.unit, k.lo, m_plan.Units()[k.unit].elements, static_cast<uint64_t>(id) << 32, *data);
        if (--p->second.left == 0)
        {
            Complete(it, k.unit);
        }
    }

  private:
    struct Pending
    {
        uint32_t left = 0;
        std::function<void()> done;
    };

    void Complete(uint32_t it, uint32_t unit)
    {
        auto p = m_pending.find(Tag(it, unit));
        auto done = std::move(p->second.done);
        m_pending.erase(p);
        m_node->ReductionChecked(it);
        done();
    }

    KeyPlan m_plan;
    std::unordered_map<uint64_t, Pending> m_pending;
};

class PsServer : public Collective
{
  public:
    explicit PsServer(JobNode* node)
        : Collective(node),
          m_plan(node->Job())
    {
        for (uint32_t id = 0; id < m_plan.Count(); id++)
        {
            if (m_plan.At(id).server == node->NodeId())
            {
                m_mine++;
            }
        }
        for (uint32_t w = 0; w < node->Workers(); w++)
        {
            node->Qp(w);
        }
    }

    /// The runner's go: a server with no key is done at once.
    void Start(uint32_t, uint32_t, uint64_t, uint64_t, WriteTag, std::function<void()> done) override
    {
        if (m_mine == 0)
        {
            done();
        }
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        MsgPtr sum = m_sums.Add(imm, data, m_node->Workers());
        if (!sum)
        {
            return;
        }
        uint32_t id = static_cast<uint32_t>(imm & 0xFFFFFFFF);
        WriteTag tag = id < m_plan.Count() ? m_plan.Units()[m_plan.At(id).unit].tag : WriteTag{};
        for (uint32_t w = 0; w < m_node->Workers(); w++)
        {
            m_node->Qp(w)->PostWrite(sum, 0, kWorkerRkey, imm, tag);
        }
        m_served++;
        if (m_served == m_mine * m_node->Job().iterations)
        {
            m_node->ServeDone();
        }
    }

    void Report(nlohmann::json& out) const override
    {
        out[res::node::kKeysServed] = m_served;
    }

  private:
    KeyPlan m_plan;
    uint64_t m_mine = 0;
    uint64_t m_served = 0;
    KeySums m_sums; // by (iteration, key): the pushes so far
};

// algo = write: worker 0 writes each reduction of each iteration to worker 1 and waits for its
// acknowledgement; worker 1 waits for it. Worker 1 reports when each write was posted and delivered.
class Write : public Collective
{
  public:
    explicit Write(JobNode* node)
        : Collective(node),
          m_peer(node->Qp(1 - node->NodeId()))
    {
    }

    void Start(uint32_t it, uint32_t op, uint64_t seq, uint64_t elements, WriteTag tag, std::function<void()> done) override
    {
        uint64_t imm = Tag(it, op);
        if (m_node->NodeId() == 0)
        {
            MsgPtr data = m_node->OwnData(it, op, 0, elements * 4, elements, 0);
            uint64_t postedPs = static_cast<uint64_t>(m_node->Now() * 1e12 + 0.5);
            m_wr[m_peer->PostWrite(data, postedPs, 0, imm, tag)] = std::move(done);
            return;
        }
        m_waiting[imm] = std::move(done);
        Deliver(imm);
    }

    void OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override
    {
        uint32_t it = static_cast<uint32_t>(imm >> 32);
        uint32_t op = static_cast<uint32_t>(imm & 0xFFFFFFFF);
        IterationCheck& c = m_node->CheckOf(it);
        for (uint32_t p = 0; p < data->Packets(); p++)
        {
            c.blocks++;
            if (m_node->Job().check != Check::None && data->digest[p] != m_node->Gen().Digest(0, it, op, p))
            {
                c.wrong += std::max<uint32_t>(1, data->PacketBytes(p) / 4);
            }
        }
        m_deliveries.push_back({{res::delivery::kIteration, it},
                                {res::delivery::kOp, op},
                                {res::delivery::kPosted, TicksToSeconds(static_cast<int64_t>(data->va))},
                                {res::delivery::kDelivered, m_node->Now()}});
        m_arrived.insert(imm);
        Deliver(imm);
    }

    void OnSendComplete(RcQp* qp, uint64_t wrId) override
    {
        auto it = m_wr.find(wrId);
        if (it != m_wr.end())
        {
            auto done = std::move(it->second);
            m_wr.erase(it);
            done();
        }
    }

    void Report(nlohmann::json& out) const override
    {
        out[res::node::kDeliveries] = m_deliveries;
    }

  private:
    void Deliver(uint64_t imm)
    {
        auto w = m_waiting.find(imm);
        if (w == m_waiting.end() || !m_arrived.count(imm))
        {
            return;
        }
        auto done = std::move(w->second);
        m_waiting.erase(w);
        m_node->ReductionChecked(static_cast<uint32_t>(imm >> 32));
        done();
    }

    RcQp* m_peer;
    std::unordered_map<uint64_t, std::function<void()>> m_wr;
    std::unordered_map<uint64_t, std::function<void()>> m_waiting;
    std::set<uint64_t> m_arrived;
    nlohmann::json m_deliveries = nlohmann::json::array();
};

} // namespace

std::unique_ptr<Collective>
MakePsWorker(JobNode* node)
{
    return std::make_unique<PsWorker>(node);
}

std::unique_ptr<Collective>
MakePsServer(JobNode* node)
{
    return std::make_unique<PsServer>(node);
}

std::unique_ptr<Collective>
MakeWrite(JobNode* node)
{
    return std::make_unique<Write>(node);
}

} // namespace gs
} // namespace ns3
