#include "gs-graph-rank.h"

#include "gs-constants.h"
#include "gs-job-node.h"
#include "gs-keys.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <memory>
#include <set>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kGraphRkey = 0x47524150; // "GRAP"
/// N chunks of `elements`, the first `elements % N` one element longer (gradswitch/hosts/ring.py chunk_bounds).
std::vector<std::pair<uint64_t, uint64_t>>
Chunks(uint64_t elements, uint32_t n)
{
    std::vector<std::pair<uint64_t, uint64_t>> out;
    uint64_t base = elements / n;
    uint64_t extra = elements % n;
    uint64_t start = 0;
    for (uint32_t c = 0; c < n; c++)
    {
        uint64_t size = base + (c < extra ? 1 : 0);
        out.emplace_back(start, size);
        start += size;
    }
    return out;
}

uint64_t
Elements(uint64_t nbytes)
{
    return (nbytes + 3) / 4;
}

uint32_t
Position(const std::vector<uint32_t>& members, uint32_t rank)
{
    return static_cast<uint32_t>(std::find(members.begin(), members.end(), rank) - members.begin());
}

} // namespace

/// An operation ends once its output is complete: everything it receives is here (and its own last step done), as
/// a collective library's kernel ends once its steps are done and as the hosts' executor ends one
/// (gradswitch/hosts/collectives/executor.py). It does not wait for its writes' acknowledgements: the queue pair
/// keeps a posted write's data (RcQp's work request holds its MsgPtr) until it is acknowledged and resends from it,
/// a later operation's writes queue behind it on the same queue pair, and the rank's job drains every queue pair
/// at its end (JobNode::Drain).
struct GraphRank::Completion
{
    bool received = false;
    bool ok = true;
    WriteTag tag{0, false}; // what the operation's writes carry (TagOf its node)
    std::function<void(bool)> done;

    void Check()
    {
        if (received && done)
        {
            auto f = std::move(done);
            done = nullptr;
            f(ok);
        }
    }
};

GraphRank::GraphRank(JobNode* node)
    : Collective(node),
      m_spec(*node->Job().graph),
      m_rank(node->NodeId()),
      m_me(m_spec.ranks.at(m_rank)),
      m_data(node->Gen(), node->Job().check, node->Job().transport.mtu,
             node->Job().dlcp && node->Job().dlcp->drop),
      m_mtu(node->Job().transport.mtu)
{
    // Every queue pair is set up before the run (a WRITE to a queue pair that does not exist yet is lost).
    std::set<uint32_t> peers;
    for (const GraphNode& n : m_me.nodes)
    {
        if (n.kind == GraphNodeKind::Send || n.kind == GraphNodeKind::Recv)
        {
            peers.insert(n.peer);
            continue;
        }
        if (n.kind != GraphNodeKind::Collective || RunsInNetwork(m_spec, n))
        {
            continue; // the switches' (the NetReduce worker's own queue pairs)
        }
        if (RunsOnServers(m_spec, n))
        {
            peers.insert(m_spec.servers.begin(), m_spec.servers.end());
            continue;
        }
        const auto& members = m_spec.groups[n.group].ranks;
        uint32_t size = static_cast<uint32_t>(members.size());
        uint32_t pos = Position(members, m_rank);
        if (n.collective == CollectiveKind::AllToAll)
        {
            peers.insert(members.begin(), members.end());
        }
        else
        {
            peers.insert(members[(pos + 1) % size]);
            peers.insert(members[(pos + size - 1) % size]);
        }
    }
    peers.erase(m_rank);
    for (uint32_t p : peers)
    {
        m_node->Qp(p);
    }
    size_t count = m_me.nodes.size();
    m_position.assign(count, 0);
    for (uint32_t p = 0; p < count; p++)
    {
        m_position[m_me.order[p]] = p;
    }
    m_nrPlace.assign(count, kOnHosts);
    m_nrJob.assign(count, 0);
    std::map<uint32_t, uint32_t> places; // by job: operations placed
    for (uint32_t i : m_me.order)
    {
        if (std::optional<uint32_t> job = InNetworkJob(m_spec, m_me.nodes[i]))
        {
            m_nrJob[i] = *job;
            m_nrPlace[i] = places[*job]++;
        }
    }
    for (std::optional<uint32_t> job : {m_spec.netReduceJob, m_spec.scatterJob, m_spec.gatherJob})
    {
        if (job)
        {
            m_inNetwork[*job].worker = MakeNetReduceWorker(node, *job); // (its queue pairs set up here too)
        }
    }
    const JobSpec& job = node->Job();
    if (job.crash && job.crash->first == m_rank && job.crashGraphNode)
    {
        for (uint32_t i = 0; i < count; i++)
        {
            m_crashAt = m_me.nodes[i].id == *job.crashGraphNode ? i : m_crashAt;
        }
        if (m_crashAt == kNoCrash || (m_me.nodes[m_crashAt].kind != GraphNodeKind::Compute &&
                                      m_me.nodes[m_crashAt].kind != GraphNodeKind::Collective))
        {
            throw ConfigError("jobs[].crash.graph_node = " + std::to_string(*job.crashGraphNode) +
                              ": no computation or collective of rank " + std::to_string(m_rank) + "'s graph");
        }
    }
    m_waiting.assign(count, 0);
    m_users.assign(count, {});
    m_records.assign(count, Record{});
    for (uint32_t i = 0; i < count; i++)
    {
        std::set<uint32_t> deps(m_me.nodes[i].deps.begin(), m_me.nodes[i].deps.end());
        m_waiting[i] = static_cast<uint32_t>(deps.size());
        for (uint32_t d : deps)
        {
            m_users[d].push_back(i);
        }
    }
}

uint32_t
GraphRank::CommunicationNodes(const GraphRankSpec& r)
{
    uint32_t n = 0;
    for (const GraphNode& x : r.nodes)
    {
        n += x.kind == GraphNodeKind::Compute || x.kind == GraphNodeKind::Send ? 0 : 1;
    }
    return n;
}

uint64_t
GraphRank::MessageImm(uint64_t tag, uint32_t k)
{
    // the top 16 bits 0: never a collective's
    return (tag & 0xFFFFFFFFULL) << 16 | (k & 0xFFFF);
}

void
GraphRank::Start(uint32_t, uint32_t, uint64_t, uint64_t, WriteTag, std::function<void()> done)
{
    m_done = std::move(done);
    if (m_me.nodes.empty())
    {
        m_done();
        return;
    }
    // the nodes without dependencies, in the order every rank numbers its operations (a node that ends at
    // once starts its users itself: they are not in this list)
    std::vector<uint32_t> ready;
    for (uint32_t i : m_me.order)
    {
        if (m_waiting[i] == 0)
        {
            ready.push_back(i);
        }
    }
    for (uint32_t i : ready)
    {
        StartNode(i);
    }
    NextCompute();
}

void
GraphRank::StartNode(uint32_t i)
{
    const GraphNode& n = m_me.nodes[i];
    m_records[i].start = m_node->Now();
    Done done = [this, i](bool ok) { NodeDone(i, ok); };
    switch (n.kind)
    {
    case GraphNodeKind::Compute:
        // one computation at a time: this one waits for the GPU (NodeDone starts the next)
        m_records[i].start = -1;
        m_readyCompute.insert(m_position[i]); // Start and NodeDone call NextCompute once all are in
        break;
    case GraphNodeKind::Collective:
        if (m_nrPlace[i] != kOnHosts)
        {
            RunNetReduce(i, done);
        }
        else if (RunsOnServers(m_spec, n))
        {
            RunPs(n, done);
        }
        else
        {
            RunCollective(n, done);
        }
        break;
    case GraphNodeKind::Send:
        RunSend(n, done);
        break;
    case GraphNodeKind::Recv:
        RunRecv(n, done);
        break;
    }
}

void
GraphRank::NextCompute()
{
    if (m_gpuBusy || m_readyCompute.empty())
    {
        return;
    }
    if (m_node->Done())
    {
        return; // the rank stopped
    }
    uint32_t i = m_me.order[*m_readyCompute.begin()];
    m_readyCompute.erase(m_readyCompute.begin());
    m_gpuBusy = true;
    m_records[i].start = m_node->Now();
    if (i == m_crashAt && m_node->CrashIfAsked(m_node->Job().crash->second))
    {
        return; // it died as the computation would start (its start kept: the iteration before it ended)
    }
    // a slow worker's computation is stretched as the training loop's (gs-training.h), from the same ticks
    double factor = m_node->Slowdown();
    Time duration = factor == 1.0 ? Seconds(m_me.nodes[i].durationS)
                                  : TimeStep(StretchedTicks(SecondsToTicks(m_me.nodes[i].durationS), factor));
    Simulator::Schedule(duration, [this, i]() {
        m_gpuBusy = false;
        NodeDone(i, true);
    });
}

void
GraphRank::NodeDone(uint32_t i, bool ok)
{
    if (m_node->Done() || m_dying)
    {
        return; // the rank stopped (it died, or its job failed; or it dies once its writes are acknowledged)
    }
    Record& r = m_records[i];
    r.end = m_node->Now();
    GraphNodeKind kind = m_me.nodes[i].kind;
    if (kind != GraphNodeKind::Compute && kind != GraphNodeKind::Send) // a send has no output to check
    {
        if (m_node->Job().check != Check::None)
        {
            r.checked = ok;
        }
        m_node->ReductionChecked(0);
        if (!ok)
        {
            m_node->CheckOf(0).wrong++;
        }
    }
    m_finished++;
    if (i == m_crashAt && kind == GraphNodeKind::Collective)
    {
        // a graph without computation: it dies once its iteration's last collective ended and its writes are
        // acknowledged, as the loop's node dies after its iteration's drain (the collective ended with its output,
        // Completion: its last writes may still be on their way to the peers that need them)
        m_dying = true;
        m_node->Drain([this]() { m_node->CrashIfAsked(m_node->Job().crash->second); });
        return;
    }
    for (uint32_t u : m_users[i])
    {
        if (--m_waiting[u] == 0)
        {
            StartNode(u);
        }
    }
    NextCompute();
    if (m_finished == m_me.nodes.size() && m_done)
    {
        auto f = std::move(m_done); // once, also when the last node ended within another's NodeDone
        m_done = nullptr;
        f();
    }
}

void
GraphRank::Expect(uint32_t peer, uint64_t imm, Loss* loss, std::function<void(MsgPtr)> f)
{
    auto key = std::make_pair(peer, imm);
    auto a = m_arrived.find(key);
    if (a != m_arrived.end())
    {
        Arrival got = std::move(a->second);
        m_arrived.erase(a);
        loss->zeroFilled += got.zeroFilled;
        f(std::move(got.data));
        return;
    }
    m_expected[key] = Expectation{loss, std::move(f)};
}

Loss*
GraphRank::LossOf(const GraphNode& n)
{
    return &m_records.at(static_cast<size_t>(&n - m_me.nodes.data())).loss;
}

void
GraphRank::OnRecv(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled)
{
    auto nr = m_inNetwork.find(qp->Config().params->job);
    if (nr != m_inNetwork.end())
    {
        nr->second.worker->OnRecv(qp, imm, std::move(data), zeroFilled); // a result on a NetReduce job's QP
        return;
    }
    if (zeroFilled)
    {
        m_node->AddZeroFilled(0, zeroFilled);
    }
    auto key = std::make_pair(qp->Config().remoteNode, imm);
    auto e = m_expected.find(key);
    if (e == m_expected.end())
    {
        m_arrived[key] = Arrival{std::move(data), zeroFilled};
        return;
    }
    Expectation x = std::move(e->second);
    m_expected.erase(e);
    x.loss->zeroFilled += zeroFilled;
    x.f(std::move(data));
}

void
GraphRank::Post(uint32_t peer, MsgPtr m, uint64_t imm, WriteTag tag)
{
    m_node->Qp(peer)->PostWrite(std::move(m), 0, kGraphRkey, imm, tag);
}

void
GraphRank::PostOf(const std::shared_ptr<Completion>& end, uint32_t peer, MsgPtr m, uint64_t imm)
{
    Post(peer, std::move(m), imm, end->tag);
}

void
GraphRank::OnSendComplete(RcQp* qp, uint64_t wrId)
{
    // the rank's own operations wait for no acknowledgement (Completion); a NetReduce worker's credits do
    auto nr = m_inNetwork.find(qp->Config().params->job);
    if (nr != m_inNetwork.end())
    {
        nr->second.worker->OnSendComplete(qp, wrId); // a contribution acknowledged
    }
}

void
GraphRank::RunCollective(const GraphNode& n, Done done)
{
    if (m_spec.groups[n.group].ranks.size() == 1)
    {
        done(true); // nothing to exchange
        return;
    }
    switch (n.collective)
    {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
        RunRing(n, std::move(done));
        break;
    case CollectiveKind::AllToAll:
        RunAllToAll(n, std::move(done));
        break;
    case CollectiveKind::Broadcast:
        RunBroadcast(n, std::move(done));
        break;
    }
}

Collective*
GraphRank::AllReduceWorker() const
{
    if (!m_spec.netReduceJob)
    {
        return nullptr;
    }
    auto job = m_inNetwork.find(*m_spec.netReduceJob);
    return job == m_inNetwork.end() ? nullptr : job->second.worker.get();
}

std::optional<uint64_t>
GraphRank::FirstUnfinished() const
{
    Collective* w = AllReduceWorker();
    return w ? w->FirstUnfinished() : std::nullopt;
}

void
GraphRank::FallBackToRing(uint64_t from, std::function<void()> firstRingDone)
{
    if (Collective* w = AllReduceWorker())
    {
        w->FallBackToRing(from, std::move(firstRingDone));
    }
}

std::optional<uint64_t>
GraphRank::NextMessage() const
{
    Collective* w = AllReduceWorker();
    return w ? w->NextMessage() : std::nullopt;
}

void
GraphRank::ReturnToSwitch(uint64_t from, std::function<void()> firstSwitchDone)
{
    if (Collective* w = AllReduceWorker())
    {
        w->ReturnToSwitch(from, std::move(firstSwitchDone));
    }
}

void
GraphRank::RunNetReduce(uint32_t i, Done done)
{
    InNetwork& job = m_inNetwork.at(m_nrJob[i]);
    job.ready[m_nrPlace[i]] = [this, i, &job, done = std::move(done)]() {
        const GraphNode& n = m_me.nodes[i];
        if (n.collective != CollectiveKind::AllReduce)
        {
            OwnedOperation op = OwnedOf(n, done);
            if (op.count == 0)
            {
                done(true); // nothing to send: every shard empty
                return;
            }
            job.worker->StartOwned(std::move(op));
            return;
        }
        // The reduction's data and check: iteration 1 + place, operation its group's k-th (the same on every
        // rank; the iteration apart from the graph's own 0, so that its check is this node's alone).
        uint32_t it = 1 + m_nrPlace[i];
        job.worker->Start(it, n.sequence, m_nrPlace[i], Elements(n.nbytes), WriteTag{},
                          [this, it, done]() { done(m_node->CheckOf(it).wrong == 0); });
    };
    // in the start order: this one and every later one that was waiting for it
    for (auto next = job.ready.find(job.started); next != job.ready.end(); next = job.ready.find(job.started))
    {
        auto start = std::move(next->second);
        job.ready.erase(next);
        job.started++;
        start();
    }
}

OwnedOperation
GraphRank::OwnedOf(const GraphNode& n, Done done)
{
    // One message per piece of a shard, in the order gradswitch/hosts/netreduce_scatter.py scatter_plan (round j: piece
    // j of every shard that has one, owners in rank order) or gradswitch/hosts/netreduce_gather.py gather_plan (round j:
    // piece j of every rank's shard, owners j, j + 1, ...) sends them. The data are the ring's of the same
    // collective (gs-graph-data.h: the same pieces of the same chunks, blocks numbered within the chunk).
    struct Message
    {
        uint32_t owner;
        Piece piece; // elements of the owner's chunk (reduce-scatter) or shard (all-gather)
        // all-gather: another rank's message that this one sends as a placeholder (headers alone), when the graph
        // says so (GraphSpec::sendPlaceholders); else as zeros, whole (gradswitch/hosts/netreduce_gather.py)
        bool placeholder = false;
    };
    struct State
    {
        std::vector<Message> plan;
        std::vector<uint32_t> members;
        bool gather = false;
        bool ok = true;
        Done done;
    };
    constexpr uint64_t kMessageElements = static_cast<uint64_t>(kAggMessageBytes) / 4;
    constexpr uint64_t kMessagePackets = kAggMessageBytes / kAggPacketBytes;
    auto st = std::make_shared<State>();
    st->members = m_spec.groups[n.group].ranks;
    st->gather = n.collective == CollectiveKind::AllGather;
    st->done = std::move(done);
    uint32_t N = static_cast<uint32_t>(st->members.size());
    uint64_t elements = Elements(n.nbytes);
    Piece base;
    base.iteration = n.group + 1;
    base.op = n.sequence;
    // per owner: its chunk's first element and length (all-gather: every shard is elements [0, elements) of its
    // owner's data, as the ring's)
    std::vector<std::pair<uint64_t, uint64_t>> chunks =
        st->gather ? std::vector<std::pair<uint64_t, uint64_t>>(N, {0, elements}) : Chunks(elements, N);
    uint64_t rounds = 0;
    for (const auto& c : chunks)
    {
        rounds = std::max<uint64_t>(rounds, (c.second + kMessageElements - 1) / kMessageElements);
    }
    for (uint64_t j = 0; j < rounds; j++)
    {
        for (uint32_t t = 0; t < N; t++)
        {
            uint32_t owner = st->gather ? static_cast<uint32_t>((j + t) % N) : t;
            const auto& [first, length] = chunks[owner];
            uint64_t start = j * kMessageElements;
            if (start >= length)
            {
                continue; // this shard has no piece j (a reduce-scatter's shorter shards, an empty one)
            }
            Piece p = base;
            p.blockBase = (st->gather ? 0 : static_cast<uint64_t>(owner) << 32) | (j * kMessagePackets);
            p.first = first + start;
            p.count = std::min<uint64_t>(kMessageElements, length - start);
            st->plan.push_back(Message{owner, p, st->gather && owner != m_rank && m_spec.sendPlaceholders});
        }
    }
    OwnedOperation op;
    op.count = st->plan.size();
    op.message = [this, st](uint64_t m) {
        const Message& msg = st->plan[m];
        OwnedMessage out;
        out.owner = msg.owner;
        if (st->gather && msg.owner != m_rank)
        {
            out.placeholder = msg.placeholder;
            return out; // zeros: the owner's values come from the owner
        }
        // this rank's data of the piece, padded with zeros to a whole NetReduce message
        MsgPtr piece = m_data.Make(m_rank, msg.piece);
        MsgPtr whole = MsgData::Make(kAggMessageBytes, kAggPacketBytes, piece->exact);
        std::copy(piece->values.begin(), piece->values.end(), whole->values.begin());
        std::copy(piece->digest.begin(), piece->digest.end(), whole->digest.begin());
        out.data = whole;
        return out;
    };
    op.arrived = [this, st](uint64_t m, MsgPtr data, uint32_t zeroFilled) {
        const Message& msg = st->plan[m];
        // reduce-scatter: its owner gets the sum whole; all-gather: every rank but the owner gets its values
        bool whole = (msg.owner == m_rank) != st->gather;
        if (!whole)
        {
            st->ok = st->ok && zeroFilled == data->Packets(); // trimmed to headers, taken as zeros
            return;
        }
        // the piece's own elements and blocks of the whole message
        MsgPtr got = MsgData::Make(msg.piece.count * 4, kAggPacketBytes, data->exact);
        if (got->exact)
        {
            std::copy(data->values.begin(), data->values.begin() + got->values.size(), got->values.begin());
        }
        std::copy(data->digest.begin(), data->digest.begin() + got->digest.size(), got->digest.begin());
        std::copy(data->lossy.begin(), data->lossy.begin() + got->lossy.size(), got->lossy.begin());
        std::vector<uint32_t> from = st->gather ? std::vector<uint32_t>{st->members[msg.owner]} : st->members;
        st->ok = st->ok && zeroFilled == 0 && m_data.Holds(*got, msg.piece, from);
    };
    op.done = [st]() { st->done(st->ok); };
    return op;
}

void
GraphRank::RunRing(const GraphNode& n, Done done)
{
    // Position j of N sends to j + 1 and receives from j - 1. Reduce-scatter step k (0..N-2): send chunk
    // j - k - 1, receive chunk j - k - 2 and add it to its own: after N - 1 steps chunk j holds every member's
    // sum. All-gather step k: send chunk j - k (its own first), receive chunk j - k - 1 as it is. All-reduce:
    // reduce-scatter, then all-gather (steps N-1..2N-3).
    struct Ring
    {
        std::vector<uint32_t> members;
        uint32_t size = 0;
        uint32_t pos = 0;
        uint32_t group = 0;
        uint32_t k = 0;
        CollectiveKind kind{};
        std::vector<std::pair<uint64_t, uint64_t>> bounds; // per chunk: first element, count
        std::vector<MsgPtr> chunks;
        std::shared_ptr<Completion> end = std::make_shared<Completion>();
        uint32_t steps = 0;
        uint32_t reduceSteps = 0; // the first steps that reduce
        Piece piece;              // which data (blockBase and bounds per chunk)
        Loss* loss = nullptr;     // the node's (DLCP)
    };
    auto r = std::make_shared<Ring>();
    r->members = m_spec.groups[n.group].ranks;
    r->size = static_cast<uint32_t>(r->members.size());
    r->pos = Position(r->members, m_rank);
    r->group = n.group;
    r->k = n.sequence;
    r->end->tag = TagOf(n);
    r->loss = LossOf(n);
    r->kind = n.collective;
    r->end->done = std::move(done);
    r->piece.iteration = n.group + 1;
    r->piece.op = n.sequence;
    uint32_t N = r->size;
    uint64_t elements = Elements(n.nbytes);
    if (n.collective == CollectiveKind::AllGather)
    {
        // every member's shard is a chunk of the output: all of the same size, each its origin's data
        for (uint32_t c = 0; c < N; c++)
        {
            r->bounds.emplace_back(0, elements);
        }
        r->chunks.assign(N, nullptr);
        r->piece.count = elements;
        r->chunks[r->pos] = m_data.Make(m_rank, r->piece);
        r->steps = N - 1;
        r->reduceSteps = 0;
    }
    else
    {
        r->bounds = Chunks(elements, N);
        for (uint32_t c = 0; c < N; c++)
        {
            Piece p = r->piece;
            p.blockBase = static_cast<uint64_t>(c) << 32;
            p.first = r->bounds[c].first;
            p.count = r->bounds[c].second;
            r->chunks.push_back(m_data.Make(m_rank, p));
        }
        r->reduceSteps = N - 1;
        r->steps = n.collective == CollectiveKind::AllReduce ? 2 * (N - 1) : N - 1;
    }
    auto step = std::make_shared<std::function<void(uint32_t)>>();
    auto finish = [this, r]() {
        uint32_t N = r->size;
        bool ok = true;
        auto piece = [&r](uint32_t c) {
            Piece p = r->piece;
            if (r->kind != CollectiveKind::AllGather)
            {
                p.blockBase = static_cast<uint64_t>(c) << 32;
                p.first = r->bounds[c].first;
                p.count = r->bounds[c].second;
            }
            return p;
        };
        if (r->kind == CollectiveKind::AllReduce)
        {
            for (uint32_t c = 0; c < N; c++)
            {
                ok = ok && m_data.Holds(*r->chunks[c], piece(c), r->members, r->loss);
            }
        }
        else if (r->kind == CollectiveKind::ReduceScatter)
        {
            ok = m_data.Holds(*r->chunks[r->pos], piece(r->pos), r->members, r->loss);
        }
        else
        {
            for (uint32_t c = 0; c < N; c++)
            {
                ok = ok && r->chunks[c] != nullptr && m_data.Holds(*r->chunks[c], piece(c), {r->members[c]}, r->loss);
            }
        }
        r->chunks.clear();
        r->end->ok = ok;
        r->end->received = true;
        r->end->Check();
    };
    *step = [this, r, step, finish](uint32_t s) {
        uint32_t N = r->size;
        uint32_t j = r->pos;
        bool reduce = s < r->reduceSteps;
        uint32_t k = reduce ? s : s - r->reduceSteps;
        uint32_t send = reduce ? (j + 2 * N - k - 1) % N : (j + N - k) % N;
        uint32_t recv = reduce ? (j + 2 * N - k - 2) % N : (j + 2 * N - k - 1) % N;
        uint64_t imm = CollectiveImm(r->group, r->k, s);
        PostOf(r->end, r->members[(j + 1) % N], r->chunks[send], imm);
        Expect(r->members[(j + N - 1) % N], imm, r->loss, [this, r, step, finish, s, reduce, recv](MsgPtr got) {
            if (reduce)
            {
                GraphData::Add(*r->chunks[recv], *got); // this rank's own chunk, not sent yet
                if (m_spec.faultDoubleAddRank == m_rank && !m_faulted)
                {
                    m_faulted = true; // fault injection (tests): the check must catch it
                    GraphData::Add(*r->chunks[recv], *got);
                }
            }
            else
            {
                r->chunks[recv] = std::move(got);
            }
            if (s + 1 == r->steps)
            {
                finish();
                // the step function may be on the stack (this arrival was already here): drop it later
                Simulator::ScheduleNow([step]() { *step = nullptr; });
                return;
            }
            (*step)(s + 1);
        });
    };
    (*step)(0);
}

void
GraphRank::RunPs(const GraphNode& n, Done done)
{
    // Every key's push at once (the transport paces them), each key's sum checked as it comes back: the sum over
    // every member of the key's elements, which the piece (group, k, key) names.
    auto end = std::make_shared<Completion>();
    end->tag = TagOf(n);
    end->done = std::move(done);
    std::vector<PsKey> keys = PsKeys(m_spec, n);
    auto left = std::make_shared<size_t>(keys.size());
    uint32_t group = n.group;
    Loss* loss = LossOf(n);
    for (const PsKey& k : keys)
    {
        Piece p;
        p.iteration = n.group + 1;
        p.op = n.sequence;
        p.blockBase = static_cast<uint64_t>(k.index) << 32;
        p.first = k.first;
        p.count = k.count;
        uint64_t imm = CollectiveImm(n.group, n.sequence, k.index);
        PostOf(end, k.server, m_data.Make(m_rank, p), imm);
        Expect(k.server, imm, loss, [this, end, left, p, group, loss](MsgPtr got) {
            end->ok = end->ok && m_data.Holds(*got, p, m_spec.groups[group].ranks, loss);
            if (--*left == 0)
            {
                end->received = true;
                end->Check();
            }
        });
    }
    if (keys.empty())
    {
        end->received = true; // nothing to reduce
        end->Check();
    }
}

void
GraphRank::RunAllToAll(const GraphNode& n, Done done)
{
    // Pairwise exchange: in step k (1..N-1) position j sends its chunk for j + k and receives from j - k; the
    // writes are posted at once, in step order, each on its own queue pair.
    const auto& members = m_spec.groups[n.group].ranks;
    uint32_t N = static_cast<uint32_t>(members.size());
    uint32_t j = Position(members, m_rank);
    auto bounds = Chunks(Elements(n.nbytes), N);
    auto piece = [&n, &bounds](uint32_t dest) {
        Piece p;
        p.iteration = n.group + 1;
        p.op = n.sequence;
        p.blockBase = static_cast<uint64_t>(dest) << 32;
        p.first = bounds[dest].first;
        p.count = bounds[dest].second;
        return p;
    };
    uint64_t imm = CollectiveImm(n.group, n.sequence, 0);
    auto end = std::make_shared<Completion>();
    end->tag = TagOf(n);
    end->done = std::move(done);
    auto left = std::make_shared<uint32_t>(N - 1);
    for (uint32_t k = 1; k < N; k++)
    {
        uint32_t dest = (j + k) % N;
        PostOf(end, members[dest], m_data.Make(m_rank, piece(dest)), imm);
    }
    Piece mine = piece(j);
    Loss* loss = LossOf(n);
    for (uint32_t k = 1; k < N; k++)
    {
        uint32_t origin = members[(j + N - k) % N];
        Expect(origin, imm, loss, [this, end, left, mine, origin, loss](MsgPtr got) {
            end->ok = end->ok && m_data.Holds(*got, mine, {origin}, loss);
            if (--*left == 0)
            {
                end->received = true;
                end->Check();
            }
        });
    }
}

void
GraphRank::RunBroadcast(const GraphNode& n, Done done)
{
    // A pipelined chain from the root: members in the group's order starting at the root; each chunk goes on
    // to the next member as soon as it is here (chunks as gradswitch/hosts/collectives/chain.py cuts them).
    const auto& members = m_spec.groups[n.group].ranks;
    uint32_t N = static_cast<uint32_t>(members.size());
    uint32_t j = Position(members, m_rank);
    uint32_t rootPos = Position(members, n.root);
    uint32_t chain = (j + N - rootPos) % N; // 0: the root
    uint64_t elements = Elements(n.nbytes);
    uint64_t want = (elements * 4 + m_spec.broadcastChunkBytes - 1) / m_spec.broadcastChunkBytes;
    uint32_t chunks = static_cast<uint32_t>(std::clamp<uint64_t>(want, 1, m_spec.broadcastMaxChunks));
    auto bounds = Chunks(elements, chunks);
    auto piece = [&n, &bounds](uint32_t c) {
        Piece p;
        p.iteration = n.group + 1;
        p.op = n.sequence;
        p.blockBase = static_cast<uint64_t>(c) << 32;
        p.first = bounds[c].first;
        p.count = bounds[c].second;
        return p;
    };
    bool last = chain == N - 1;
    uint32_t next = members[(j + 1) % N];
    uint32_t prev = members[(j + N - 1) % N];
    auto end = std::make_shared<Completion>();
    end->tag = TagOf(n);
    end->done = std::move(done);
    if (chain == 0)
    {
        // the root receives nothing: its output is complete once its last chunk is posted
        for (uint32_t c = 0; c < chunks; c++)
        {
            PostOf(end, next, m_data.Make(m_rank, piece(c)), CollectiveImm(n.group, n.sequence, c));
        }
        end->received = true;
        end->Check();
        return;
    }
    auto left = std::make_shared<uint32_t>(chunks);
    uint32_t root = n.root;
    Loss* loss = LossOf(n);
    for (uint32_t c = 0; c < chunks; c++)
    {
        uint64_t imm = CollectiveImm(n.group, n.sequence, c);
        Piece p = piece(c);
        Expect(prev, imm, loss, [this, end, left, p, root, last, next, imm, loss](MsgPtr got) {
            if (!last)
            {
                PostOf(end, next, got, imm);
            }
            end->ok = end->ok && m_data.Holds(*got, p, {root}, loss);
            if (--*left == 0)
            {
                end->received = true;
                end->Check();
            }
        });
    }
}

void
GraphRank::RunSend(const GraphNode& n, Done done)
{
    Piece p;
    p.op = static_cast<uint32_t>(Mix(static_cast<uint64_t>(m_rank) << 32 | n.peer, n.tag));
    p.blockBase = static_cast<uint64_t>(n.sequence) << 32;
    p.count = Elements(n.nbytes);
    // done once posted (its own last step), as a collective's end: the queue pair keeps the data until acknowledged
    Post(n.peer, m_data.Make(m_rank, p), MessageImm(n.tag, n.sequence), TagOf(n));
    done(true);
}

void
GraphRank::RunRecv(const GraphNode& n, Done done)
{
    Piece p;
    p.op = static_cast<uint32_t>(Mix(static_cast<uint64_t>(n.peer) << 32 | m_rank, n.tag));
    p.blockBase = static_cast<uint64_t>(n.sequence) << 32;
    p.count = Elements(n.nbytes);
    uint32_t from = n.peer;
    Loss* loss = LossOf(n);
    Expect(from, MessageImm(n.tag, n.sequence), loss,
           [this, p, from, done, loss](MsgPtr got) { done(m_data.Holds(*got, p, {from}, loss)); });
}

void
GraphRank::Report(nlohmann::json& out) const
{
    nlohmann::json nodes = nlohmann::json::array();
    for (size_t i = 0; i < m_me.nodes.size(); i++)
    {
        const Record& r = m_records[i];
        nodes.push_back({m_me.nodes[i].id, r.start, r.end, r.checked ? nlohmann::json(*r.checked) : nlohmann::json(nullptr),
                         r.loss.zeroFilled, r.loss.error2, r.loss.norm2});
    }
    out[res::node::kGraph] = nodes;
    // `netreduce`: the all-reduce worker's messages and credit waits (else the only job's); `netreduce_jobs`: every
    // switch job's, by id
    nlohmann::json jobs = nlohmann::json::object();
    for (const auto& [id, job] : m_inNetwork)
    {
        nlohmann::json one;
        job.worker->Report(one);
        jobs[std::to_string(id)] = one[res::node::kNetreduce];
        if (id == m_spec.netReduceJob || m_inNetwork.size() == 1)
        {
            out[res::node::kNetreduce] = one[res::node::kNetreduce];
        }
    }
    if (!m_inNetwork.empty())
    {
        out[res::node::kNetreduceJobs] = jobs;
    }
}

std::unique_ptr<Collective>
MakeGraphRank(JobNode* node)
{
    return std::make_unique<GraphRank>(node);
}

} // namespace gs
} // namespace ns3
