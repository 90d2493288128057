#include "gs-netreduce-switch.h"

#include "gs-constants.h"
#include "gs-switch.h"

#include <algorithm>
#include <cstring>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kMsgBits = 24 - kAggPacketsLog2; // a message number is the PSN less its packet offset
constexpr uint32_t kMsgMask = (1u << kMsgBits) - 1;
constexpr uint32_t kMsgHalf = 1u << (kMsgBits - 1);
constexpr uint32_t kChildTag = 0xFFFFF;  // a child's partial sums (GsSwitch member keys)
constexpr uint32_t kParentTag = 0xFFFFE; // the parent's results

uint32_t
NextPow2(uint32_t x)
{
    uint32_t p = 1;
    while (p < x)
    {
        p <<= 1;
    }
    return p;
}

} // namespace

NrSwitchJob::NrSwitchJob(GsSwitch* sw, uint32_t jobId, NrOwners owners, const JobSpec& job,
                         const AggregationRole& role, const std::vector<uint32_t>& workerHosts,
                         const std::vector<uint32_t>& workerNodes, const WireSizes& wire)
    : m_sw(sw),
      m_job(jobId),
      m_owners(owners),
      m_role(role),
      m_workerHosts(workerHosts),
      m_n(static_cast<uint32_t>(workerHosts.size())),
      m_credits(job.credits),
      m_ctxSlots(NextPow2(job.credits)),
      m_exact(job.check == Check::Exact),
      m_growPlaceholders(job.graph && job.graph->growPlaceholders),
      m_wire(wire)
{
    m_localPort.assign(m_n, 0);
    for (uint32_t r : role.localRanks)
    {
        m_members.push_back(Member{true, r, 0});
    }
    for (size_t c = 0; c < role.children.size(); c++)
    {
        m_members.push_back(Member{false, static_cast<uint32_t>(c), role.childPorts[c]});
    }
    m_words = (static_cast<uint32_t>(m_members.size()) + 63) / 64;
    uint32_t cells = 2 * m_credits * kAggPackets;
    m_cells.assign(cells, Cell{});
    m_bitmaps.assign(static_cast<size_t>(cells) * m_words, 0);
    if (m_exact)
    {
        m_values.assign(static_cast<size_t>(cells) * kAggElements, 0);
    }
    m_context.assign(static_cast<size_t>(m_members.size()) * m_ctxSlots, Context{});
    m_scratch.resize(kAggElements);
    (void)workerNodes;
}

void
NrSwitchJob::Clear()
{
    std::fill(m_cells.begin(), m_cells.end(), Cell{});
    std::fill(m_bitmaps.begin(), m_bitmaps.end(), 0);
    std::fill(m_values.begin(), m_values.end(), 0);
    std::fill(m_context.begin(), m_context.end(), Context{});
}

bool
NrSwitchJob::Bit(uint32_t cell, uint32_t member) const
{
    return (m_bitmaps[static_cast<size_t>(cell) * m_words + member / 64] >> (member % 64)) & 1;
}

void
NrSwitchJob::SetBit(uint32_t cell, uint32_t member, bool on)
{
    uint64_t& word = m_bitmaps[static_cast<size_t>(cell) * m_words + member / 64];
    uint64_t mask = 1ULL << (member % 64);
    word = on ? (word | mask) : (word & ~mask);
}

bool
NrSwitchJob::Empty(uint32_t cell) const
{
    for (uint32_t i = 0; i < m_words; i++)
    {
        if (m_bitmaps[static_cast<size_t>(cell) * m_words + i])
        {
            return false;
        }
    }
    return true;
}

void
NrSwitchJob::ClearBits(uint32_t cell)
{
    for (uint32_t i = 0; i < m_words; i++)
    {
        m_bitmaps[static_cast<size_t>(cell) * m_words + i] = 0;
    }
}

void
NrSwitchJob::Refuse(const char* event)
{
    events[event]++;
    m_sw->drops["netreduce-refused"]++;
}

void
NrSwitchJob::ReadValues(Ptr<Packet> p, const Wire& w, std::vector<int32_t>& out) const
{
    std::fill(out.begin(), out.end(), 0);
    uint32_t bytes = std::min<uint32_t>(w.payload, kAggPacketBytes);
    if (bytes == 0 || p->GetSize() < sizeof(Wire) + bytes)
    {
        return;
    }
    std::vector<uint8_t> buf(sizeof(Wire) + bytes);
    p->CopyData(buf.data(), static_cast<uint32_t>(buf.size()));
    std::memcpy(out.data(), buf.data() + sizeof(Wire), bytes);
}

bool
NrSwitchJob::Locate(uint32_t member, const Wire& w, uint32_t& cell, uint32_t& other, uint32_t& owner)
{
    // learn_context / recall_context: the first packet's RETH places the message in the job's window (and,
    // on a reduce-scatter's or all-gather's job, names its owner above the window index: rank + 1, 0 for an
    // all-reduce message); later packets find both from their PSN (per member QP, per message in flight).
    uint32_t msg = (w.psn >> kAggPacketsLog2) & kMsgMask;
    Context& ctx = m_context[static_cast<size_t>(member) * m_ctxSlots + (msg & (m_ctxSlots - 1))];
    if (w.flags & F_RETH)
    {
        // a job that reads no owners takes the whole address as the window's: an owner field is out of it
        uint64_t field = m_owners == NrOwners::None ? 0 : w.va >> kOwnerVaShift;
        uint64_t place = m_owners == NrOwners::None ? w.va : w.va & ((1ULL << kOwnerVaShift) - 1);
        uint64_t win = place >> kAggMessageBytesLog2;
        bool aligned = (w.psn & (kAggPackets - 1)) == 0 && (w.va & (kAggMessageBytes - 1)) == 0 &&
                       w.dmaLen == kAggMessageBytes;
        if (!aligned || win >= 2ULL * m_credits || field > m_n)
        {
            Refuse("malformed");
            return false;
        }
        ctx = Context{true, msg, static_cast<uint32_t>(win), static_cast<uint32_t>(field)};
    }
    else if (!ctx.valid || ctx.msg != msg)
    {
        Refuse("no-context");
        return false;
    }
    uint32_t window = ctx.window;
    owner = ctx.owner;
    uint32_t offset = w.psn & (kAggPackets - 1);
    cell = window * kAggPackets + offset;
    uint32_t twin = window >= m_credits ? window - m_credits : window + m_credits;
    other = twin * kAggPackets + offset;
    return true;
}

bool
NrSwitchJob::Trimmed(uint32_t r, uint32_t owner) const
{
    // reduce-scatter: every copy but the owner's; all-gather: the owner's alone; an all-reduce message's
    // (owner 0) is nobody's: whole
    return owner != 0 && (r + 1 == owner) == (m_owners == NrOwners::Gather);
}

void
NrSwitchJob::Size(Wire& w, bool trimmed) const
{
    uint32_t headers = m_wire.roceOverhead + ((w.flags & F_RETH) ? m_wire.reth : 0) + ((w.flags & F_IMM) ? m_wire.imm : 0);
    w.payload = trimmed ? 0 : kAggPacketBytes;
    w.wire = headers + w.payload;
    w.resv7 = static_cast<uint8_t>(trimmed ? (w.resv7 | kTrimmed) : (w.resv7 & ~kTrimmed));
}

Ptr<Packet>
NrSwitchJob::Make(Wire& w, uint32_t cell) const
{
    const Cell& c = m_cells[cell];
    w.digest = c.digest;
    w.flags = static_cast<uint16_t>(c.lossy ? (w.flags | F_LOSSY) : (w.flags & ~F_LOSSY));
    Ptr<Packet> p = m_exact && w.payload > 0
                        ? Create<Packet>(reinterpret_cast<const uint8_t*>(&m_values[static_cast<size_t>(cell) * kAggElements]),
                                         std::min<uint32_t>(w.payload, kAggPacketBytes))
                        : Create<Packet>();
    GsHeader h;
    h.w = w;
    p->AddHeader(h);
    return p;
}

void
NrSwitchJob::Emit(const Wire& in, uint32_t cell, uint32_t owner, const std::vector<uint32_t>& ranks, bool children)
{
    // The result on the connection of every local receiver r (its sender is r - 1), whole or trimmed as its
    // owner field says, and down to children whole.
    for (uint32_t r : ranks)
    {
        uint32_t j = (r + m_n - 1) % m_n;
        Wire w = in;
        Size(w, false);
        w.kind = KIND_ROCE;
        w.flags = static_cast<uint16_t>(w.flags & ~(F_NR | F_RETX));
        w.src = m_workerHosts[j];
        w.dst = m_workerHosts[r];
        w.srcNode = j;
        w.dstNode = r;
        w.sport = UdpSourcePort(m_job, j);
        w.dport = kRoceUdpPort;
        // classified whole in ingress, trimmed in egress (netreduce_scatter.p4): it keeps its connection's queue,
        // behind the whole copies before it (no copy overtakes another on a connection)
        uint8_t queue = m_sw->Classify(w);
        Size(w, Trimmed(r, owner));
        Ptr<Packet> p = Make(w, cell);
        m_sw->Forward(p, w, queue);
    }
    if (children)
    {
        for (size_t c = 0; c < m_role.children.size(); c++)
        {
            Wire w = in;
            Size(w, false);
            w.kind = KIND_NR_RESULT;
            w.flags = static_cast<uint16_t>(w.flags & ~(F_NR | F_RETX));
            w.src = m_sw->Index();
            w.dst = m_role.children[c];
            w.srcNode = kParentTag;
            Ptr<Packet> p = Make(w, cell);
            m_sw->SendToPort(m_role.childPorts[c], p, w);
        }
    }
}

void
NrSwitchJob::SendUp(const Wire& in, uint32_t cell)
{
    Wire w = in;
    Size(w, false);
    w.kind = KIND_NR_PARTIAL;
    w.flags = static_cast<uint16_t>(w.flags & ~(F_NR | F_RETX));
    w.src = m_sw->Index();
    w.dst = static_cast<uint32_t>(m_role.parent);
    w.srcNode = kChildTag;
    Ptr<Packet> p = Make(w, cell);
    m_sw->SendToPort(m_role.parentPort, p, w);
}

void
NrSwitchJob::Answer(uint32_t member, const Wire& in, uint32_t cell, uint32_t owner)
{
    const Member& m = m_members[member];
    if (m.worker)
    {
        // A retransmission of worker j: the result on its connection j -> j + 1 alone (routed: the receiver
        // may be on another switch).
        uint32_t j = m.index;
        uint32_t peer = (j + 1) % m_n;
        Wire w = in;
        Size(w, false);
        w.kind = KIND_ROCE;
        w.flags = static_cast<uint16_t>(w.flags & ~(F_NR | F_RETX));
        w.src = m_workerHosts[j];
        w.dst = m_workerHosts[peer];
        w.srcNode = j;
        w.dstNode = peer;
        w.sport = UdpSourcePort(m_job, j);
        w.dport = kRoceUdpPort;
        uint8_t queue = m_sw->Classify(w); // (as Emit's)
        Size(w, Trimmed(peer, owner));
        Ptr<Packet> p = Make(w, cell);
        m_sw->Forward(p, w, queue);
        return;
    }
    Wire w = in;
    Size(w, false);
    w.kind = KIND_NR_RESULT;
    w.flags = static_cast<uint16_t>(w.flags & ~(F_NR | F_RETX));
    w.src = m_sw->Index();
    w.dst = m_role.children[m.index];
    w.srcNode = kParentTag;
    Ptr<Packet> p = Make(w, cell);
    m_sw->SendToPort(m.port, p, w);
}

void
NrSwitchJob::Accept(uint32_t cell, bool fresh, bool counted, Ptr<Packet> p, const Wire& w)
{
    Cell& c = m_cells[cell];
    if (m_exact)
    {
        ReadValues(p, w, m_scratch);
        int32_t* v = &m_values[static_cast<size_t>(cell) * kAggElements];
        if (fresh)
        {
            std::memcpy(v, m_scratch.data(), kAggPacketBytes);
        }
        else
        {
            for (uint32_t i = 0; i < kAggElements; i++)
            {
                v[i] = static_cast<int32_t>(static_cast<uint32_t>(v[i]) + static_cast<uint32_t>(m_scratch[i]));
            }
        }
    }
    if (fresh)
    {
        c.count = 0;
        c.final = false;
        c.digest = 0;
        c.lossy = false;
        ClearBits(cell);
    }
    c.msg = (w.psn >> kAggPacketsLog2) & kMsgMask;
    c.digest += w.digest;
    c.lossy = c.lossy || (w.flags & F_LOSSY);
    c.count += counted ? 1 : 0;
}

void
NrSwitchJob::Contribution(uint32_t member, Ptr<Packet> p, const Wire& w)
{
    // an all-gather job's placeholder: headers alone, marked trimmed, from a worker: a contribution of zeros
    bool placeholder = m_owners == NrOwners::Gather && m_members[member].worker && (w.resv7 & kTrimmed) &&
                       w.payload == 0;
    if (!(w.opcode == ROCE_WRITE_FIRST || w.opcode == ROCE_WRITE_MIDDLE || w.opcode == ROCE_WRITE_LAST_IMM) ||
        (w.payload != kAggPacketBytes && !placeholder))
    {
        Refuse("malformed");
        return;
    }
    uint32_t cell;
    uint32_t other;
    uint32_t owner;
    if (!Locate(member, w, cell, other, owner))
    {
        return;
    }
    // contribute(): one read-modify-write of the cell and its twin.
    Cell& c = m_cells[cell];
    uint32_t msg = (w.psn >> kAggPacketsLog2) & kMsgMask;
    bool mine = Bit(cell, member);
    bool fresh = Empty(cell);
    bool same = c.msg == msg;
    // A placeholder is only ever a first contribution that does not complete the cell: one that would complete
    // it, or be answered, is held (the P4 program's `held`: BMv2 cannot grow it into the values to send it on).
    // (The what-if of a switch that can grow it: GraphSpec::growPlaceholders.)
    bool held = placeholder && !m_growPlaceholders && (mine || (fresh ? 0 : c.count) + 1 == m_members.size());
    bool add = !mine && !fresh && same && !held;
    bool accept = (fresh && !held) || add;
    uint32_t newCount = (fresh ? 0 : c.count) + (accept ? 1 : 0);
    bool complete = newCount == m_members.size();
    bool behind = ((msg - c.msg) & kMsgMask) >= kMsgHalf;
    bool final = c.final;
    if (accept)
    {
        int times = m_sw->DoubleAddFault() ? 2 : 1;
        for (int t = 0; t < times; t++)
        {
            Accept(cell, fresh && t == 0, t == 0, p, w); // (a second time: the values only, the injected fault)
        }
        SetBit(cell, member, true);
        SetBit(other, member, false); // the member has moved on from the twin's older message
        if (placeholder)
        {
            events["placeholder"]++; // taken as zeros
        }
    }
    bool hasParent = m_role.parent >= 0;
    // nr_verdicts, first match wins.
    if (held)
    {
        Refuse("placeholder-last"); // untouched: its sender's retransmission goes whole (zeros)
    }
    else if (mine && same && complete && !final && hasParent)
    {
        events["partial-up"]++;
        SendUp(w, cell); // a retransmission at a switch still waiting for its parent: the partial again
    }
    else if (mine && same && complete)
    {
        events["retransmitted-result"]++;
        Answer(member, w, cell, owner);
    }
    else if (mine && same)
    {
        Refuse("duplicate");
    }
    else if (mine)
    {
        Refuse("stale");
    }
    else if (accept && complete && hasParent)
    {
        events["contribution"]++;
        events["completion"]++;
        events["partial-up"]++;
        SendUp(w, cell);
    }
    else if (accept && complete)
    {
        events["contribution"]++;
        events["completion"]++;
        Emit(w, cell, owner, m_receivers.empty() ? m_role.localRanks : m_receivers, true);
    }
    else if (accept)
    {
        events["contribution"]++;
    }
    else if (behind)
    {
        Refuse("stale");
    }
    else
    {
        Refuse("no-credit");
    }
}

void
NrSwitchJob::ParentResult(Ptr<Packet> p, const Wire& w)
{
    if (!(w.opcode == ROCE_WRITE_FIRST || w.opcode == ROCE_WRITE_MIDDLE || w.opcode == ROCE_WRITE_LAST_IMM))
    {
        Refuse("malformed");
        return;
    }
    // The parent is the last member slot + 1 for its context.
    uint32_t cell;
    uint32_t other;
    uint32_t owner;
    uint32_t parentSlot = static_cast<uint32_t>(m_members.size());
    if (m_context.size() < static_cast<size_t>(parentSlot + 1) * m_ctxSlots)
    {
        m_context.resize(static_cast<size_t>(parentSlot + 1) * m_ctxSlots, Context{});
    }
    if (!Locate(parentSlot, w, cell, other, owner))
    {
        return;
    }
    // store_result(): stored if it is for the cell's message; emitted once.
    Cell& c = m_cells[cell];
    uint32_t msg = (w.psn >> kAggPacketsLog2) & kMsgMask;
    bool current = c.msg == msg;
    if (!current)
    {
        Refuse("stale");
        return;
    }
    bool wasFinal = c.final;
    if (m_exact)
    {
        ReadValues(p, w, m_scratch);
        std::memcpy(&m_values[static_cast<size_t>(cell) * kAggElements], m_scratch.data(), kAggPacketBytes);
    }
    c.digest = w.digest;
    c.lossy = (w.flags & F_LOSSY) != 0;
    c.final = true;
    if (wasFinal)
    {
        Refuse("duplicate");
        return;
    }
    events["result-down"]++;
    Emit(w, cell, owner, m_role.localRanks, true);
}

} // namespace gs
} // namespace ns3
