/*
 * NetReduce: in-network gradient reduction on RoCE v2 Reliable Connections.
 * The design (packet format, slot life cycle, loss, credits, hierarchy) is docs/netreduce.md.
 *
 * NetReduceIngress (applied to RoCE packets only: hdr.bth valid) identifies members' packets, checks their ICRC (a corrupted packet is
 * dropped before it touches any register), places them in aggregator cells (the first packet
 * of a message carries the place in its RETH; later packets use per-QP context plus their
 * PSN offset), sums them lane-wise in wide registers inside one action, and on completion
 * multicasts the result. NetReduceEgress rewrites each copy into one worker's connection and
 * recomputes the ICRC, so unmodified RoCE receivers accept it.
 */
#ifndef _GRADSWITCH_NETREDUCE_P4_
#define _GRADSWITCH_NETREDUCE_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"
#include "../agg_payload.p4"
#include "icrc.p4"

#if (1 << AGG_MESSAGE_BYTES_LOG2) != AGG_PACKETS_PER_MESSAGE * AGG_ELEMENTS_PER_PACKET * 4
#error "AGG_MESSAGE_BYTES_LOG2 must be log2 of a message's bytes"
#endif
#if (1 << AGG_PACKETS_PER_MESSAGE_LOG2) != AGG_PACKETS_PER_MESSAGE
#error "AGG_PACKETS_PER_MESSAGE_LOG2 must be log2 of AGG_PACKETS_PER_MESSAGE"
#endif

// A parent's result at its cell (store_result sets meta.nr_state.outcome).
const bit<16> NR_OUT_COMPLETE = 2;   // stored: emit it to the local receivers
const bit<16> NR_OUT_DUPLICATE = 4;  // the cell already holds it (the parent answered a repeated partial): drop
const bit<16> NR_OUT_STALE = 6;      // for a message older than the cell's: drop
const bool NR_OUT_DUPLICATE_IS_COMPLETE_PLUS_2 = static_assert(NR_OUT_DUPLICATE == NR_OUT_COMPLETE + 2,
    "store_result makes NR_OUT_DUPLICATE as NR_OUT_COMPLETE + 2");

// A contribution's verdict (contribute sets meta.nr_state.outcome to these bits; nr_verdicts maps them to
// what happens, one table instead of a chain of conditions: BMv2 pays for every pipeline node).
const bit<16> NR_V_CLOSING = 0x100;  // k of N: the packet closes its cell with fewer than the quorum (judge_late)
const bit<16> NR_V_LATE = 0x80;      // k of N: its cell's sum was emitted without this member's message: not added
const bit<16> NR_V_HELD = 0x40;      // a placeholder that would complete the cell, or be answered: refused
const bit<16> NR_V_MINE = 0x20;      // the member had already contributed to the cell's message
const bit<16> NR_V_ACCEPT = 0x10;    // added (fresh cell, or another member's partial sum of the same message)
const bit<16> NR_V_SAME = 0x08;      // the cell holds this message
const bit<16> NR_V_COMPLETE = 0x04;  // the quorum has contributed (after this one): every member, but on a k-of-N job
const bit<16> NR_V_BEHIND = 0x02;    // the message is older than the cell's
const bit<16> NR_V_FINAL = 0x01;     // leaf: the cell holds its parent's result

// Message numbers are PSN >> AGG_PACKETS_PER_MESSAGE_LOG2: the PSN's 24 bits less the packet offset.
#define NR_MSG_BITS (24 - AGG_PACKETS_PER_MESSAGE_LOG2)
#define NR_MSG_MASK ((1 << NR_MSG_BITS) - 1)
#define NR_MSG_HALF (1 << (NR_MSG_BITS - 1))
// Per-QP context entry: valid (bit 31) | owner (reduce-scatter, from bit NR_CTX_OWNER_SHIFT) | window index
// (from bit NR_MSG_BITS) | message number (below it).
#define NR_CTX_VALID 0x80000000
#define NR_CTX_OWNER_SHIFT (NR_MSG_BITS + NR_CTX_WINDOW_BITS)
#define NR_CTX_WINDOW_MASK ((1 << NR_CTX_WINDOW_BITS) - 1)
#define NR_CTX_OWNER_MASK ((1 << NR_CTX_OWNER_BITS) - 1)
#if NR_CTX_OWNER_SHIFT + NR_CTX_OWNER_BITS > 31
#error "a per-QP context entry must hold the message number, the window index, the owner and the valid bit"
#endif
#if (1 << NR_CTX_WINDOW_BITS) < 2 * AGG_MAX_CREDITS || (1 << NR_CTX_OWNER_BITS) < AGG_MAX_MEMBERS
#error "a per-QP context entry must hold a window index below 2 x AGG_MAX_CREDITS and an owner below AGG_MAX_MEMBERS"
#endif
#if NR_OWNER_VA_SHIFT != AGG_MESSAGE_BYTES_LOG2 + NR_CTX_WINDOW_BITS
#error "a RETH's owner must sit right above its window index"
#endif
#if NR_CELL_MSG_SHIFT < AGG_MAX_MEMBERS || NR_CELL_COUNT_SHIFT < NR_CELL_MSG_SHIFT + NR_MSG_BITS
#error "a cell's state must hold the bitmap, then the message number"
#endif
#if NR_CELL_FINAL_SHIFT < NR_CELL_COUNT_SHIFT + NR_CELL_COUNT_BITS || NR_CELL_FINAL_SHIFT > 63
#error "a cell's state must hold the count, then the final flag, in 64 bits"
#endif
#if (1 << NR_CELL_COUNT_BITS) <= AGG_MAX_MEMBERS
#error "a cell's count must reach AGG_MAX_MEMBERS"
#endif

// One word (64 int32 lanes) of a contribution, in word q's own register (indexed by the cell, so
// no index is computed per word): fresh -> the payload, accepted into a partial cell -> the
// lane-wise sum, refused -> the cell as it was. The packet leaves carrying what the cell now
// holds. BMv2 evaluates only the branch a ?: takes, and pays per primitive and per wide
// operation, so each word costs one register read, one assignment (no operation for a fresh
// cell, six for a sum, none for a refusal) and one register write. The value goes into the
// header field and the register is written from that field (p4c would copy-propagate a local
// holding the sum and evaluate the sum twice). meta.nr_state.word serves every word (and store_result):
// each wide local would be a metadata field of its own, which BMv2 zeroes for every packet.
#define NR_ADD(q) \
    nr_values##q.read(meta.nr_state.word, meta.nr_state.cell); \
    hdr.agg.w##q = add ? AGG_LANE_ADD(meta.nr_state.word, hdr.agg.w##q) : hdr.agg.w##q; \
    hdr.agg.w##q = accept ? hdr.agg.w##q : meta.nr_state.word; \
    nr_values##q.write(meta.nr_state.cell, hdr.agg.w##q);

// One word of a parent's result: stored when it is for the cell's current message (else the packet,
// refused, carries the cell's word and the cell keeps it).
#define NR_STORE(q) \
    nr_values##q.read(meta.nr_state.word, meta.nr_state.cell); \
    hdr.agg.w##q = current ? hdr.agg.w##q : meta.nr_state.word; \
    nr_values##q.write(meta.nr_state.cell, hdr.agg.w##q);

// The packet's cell, and the same position in the slot's other shadow copy, from the window index
// and the PSN's offset: the last statements of learn_context and recall_context (in the same action:
// one pipeline node less per packet).
#define NR_LOCATE() \
    bit<32> credits = (bit<32>)meta.nr_state.credits; \
    bit<32> at = (bit<32>)meta.nr_state.window; \
    bit<32> offset = (bit<32>)(hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1)); \
    meta.nr_state.cell = meta.nr_state.base_cell + (at << AGG_PACKETS_PER_MESSAGE_LOG2) + offset; \
    meta.nr_state.other_cell = meta.nr_state.base_cell + ((at >= credits ? at - credits : at + credits) << AGG_PACKETS_PER_MESSAGE_LOG2) \
        + offset;

// A packet of job JOB NetReduce must handle (a member's, or one claiming the job): its working state,
// zeroed (meta.nr_state, headers.p4; other RoCE packets never pay for it), and where its events count.
#define NR_BEGIN(JOB) \
    meta.nr_state.setValid(); \
    meta.nr_state.job = JOB; \
    meta.nr_state.job_events = (bit<32>)(JOB) * NR_EVENTS; \
    meta.nr_state.port_events = (bit<32>)std_meta.ingress_port * NR_EVENTS;

// Event E (NR_EV_*) of the packet in tally slot S (0 .. NR_TALLY - 1): the cells tally counts.
#define NR_EVENT(S, E) \
    meta.nr_state.job_event##S = meta.nr_state.job_events + (E); \
    meta.nr_state.port_event##S = meta.nr_state.port_events + (E);
#if NR_TALLY != 3
#error "tally counts three event slots"
#endif

// The sums: word q (64 int32 lanes) of every cell in register nr_values<q>.
#define NR_VALUES_REGISTER(q) register<bit<AGG_WORD_BITS>>(AGG_CELLS) nr_values##q;

control NetReduceIngress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {


    // Events (NR_EV_*) per job and per ingress port.
    counter(AGG_MAX_JOBS * NR_EVENTS, CounterType.packets) nr_job_events;
    counter(MAX_PORTS * NR_EVENTS, CounterType.packets) nr_port_events;

    // The sums: AGG_WORDS_PER_PACKET wide words (AGG_ELEMENTS_PER_PACKET int32 lanes) per cell, word q in nr_values<q>.
    AGG_FOR_EACH_WORD(NR_VALUES_REGISTER)
    // A cell's state, one register cell (one read and one write per packet): the members that contributed
    // to the cell's current message (bitmap, low AGG_MAX_MEMBERS bits), that message's number (from
    // NR_CELL_MSG_SHIFT), how many contributed (NR_CELL_COUNT_SHIFT), and on a leaf whether the parent's
    // result has arrived (NR_CELL_FINAL_SHIFT: the cell holds the result, not the local partial).
    register<bit<64>>(AGG_CELLS) nr_cells;
    // k of N with a deadline: when each cell's first contribution came (ingress_global_timestamp, microseconds)
    register<bit<32>>(AGG_CELLS) nr_cell_started;
    // Per member QP, per message in flight (message mod AGG_MAX_CREDITS): window index learned at the first packet.
    register<bit<32>>(AGG_MAX_QPS * AGG_MAX_CREDITS) nr_qp_context;

    // ---- who is who ----

    // The member, and the message its packet belongs to (which per-QP context entry holds its place).
    action set_member(bit<8> job, bit<8> member_bit, bit<16> member_id, bit<8> peer_index, bit<8> kind) {
        NR_BEGIN(job)
        meta.nr_state.member_bit = member_bit;
        meta.nr_state.peer_index = peer_index;
        meta.nr_state.kind = kind;
        meta.nr_state.msg = (bit<32>)(hdr.bth.psn >> AGG_PACKETS_PER_MESSAGE_LOG2);
        meta.nr_state.context = (bit<32>)member_id * AGG_MAX_CREDITS
            + (meta.nr_state.msg & (AGG_MAX_CREDITS - 1));
    }

    // A worker's (or child switch's, or the parent's) QP: ingress port, source address, destination QP.
    table nr_members {
        key = {
            std_meta.ingress_port: exact;
            hdr.ipv4.src_addr: exact;
            hdr.bth.dest_qp: exact;
        }
        actions = {
            set_member;
            NoAction;
        }
        default_action = NoAction();
        size = AGG_MAX_QPS;
    }

    action set_job(bit<32> base_cell, bit<8> credits, bit<8> members, bit<8> quorum, bit<8> partial,
                   bit<32> deadline_us, bit<8> role, bit<16> group_base, bit<8> owners, bit<8> gather) {
        meta.nr_state.quorum = quorum;
        meta.nr_state.partial = partial;
        meta.nr_state.deadline = deadline_us;
        meta.nr_state.gather = gather;
        meta.nr_state.base_cell = base_cell;
        meta.nr_state.credits = credits;
        meta.nr_state.members = members;
        meta.nr_state.role = role;
        meta.nr_state.group_base = group_base;
        meta.nr_state.owners = owners;
    }

    table nr_jobs {
        key = {
            meta.nr_state.job: exact;
        }
        actions = {
            set_job;
            NoAction;
        }
        default_action = NoAction();
        size = AGG_MAX_JOBS;
    }

    // The packet names a job it may not be a member of: refused from a host port.
    action claim(bit<8> job) {
        NR_BEGIN(job)
    }

    // The job a first packet names by its RETH rkey.
    table nr_job_keys {
        key = {
            hdr.reth.rkey: exact;
        }
        actions = {
            claim;
            NoAction;
        }
        default_action = NoAction();
        size = AGG_MAX_JOBS;
    }

    // The job a packet names by the connection it is sent on.
    table nr_job_connections {
        key = {
            hdr.ipv4.dst_addr: exact;
            hdr.bth.dest_qp: exact;
        }
        actions = {
            claim;
            NoAction;
        }
        default_action = NoAction();
        size = AGG_MAX_QPS;
    }

    // Host-facing ports: only there may a packet that claims a job be refused for not being a member.
    table nr_host_ports {
        key = {
            std_meta.ingress_port: exact;
        }
        actions = {
            NoAction;
        }
        size = MAX_PORTS;
    }

    // ---- integrity (controls/icrc.p4) ----

    // Before anything of the packet is used: is its ICRC the one its covered headers give?
    action check_icrc() {
        meta.nr_state.icrc = hdr.icrc.value;
        ICRC_COVER()
        ICRC_OF_HEADERS(meta.nr_state.entry)
        meta.nr_state.icrc_ok = meta.nr_state.entry == meta.nr_state.icrc;
    }

    // The ICRC of what the packet now carries, once, on the canonical connection (zero addresses,
    // port and QP): egress makes each copy's from it. Ethernet and the trailer come back for egress.
    action canonical_icrc() {
        hdr.ipv4.src_addr = 0;
        hdr.ipv4.dst_addr = 0;
        hdr.udp.src_port = 0;
        hdr.bth.dest_qp = 0;
        // k of N: the Last packet tells every receiver which members the sum holds (NR_IMM_MEMBERS_SHIFT).
        hdr.immdt.data = meta.nr_state.partial == 1 && hdr.immdt.isValid()
            ? (hdr.immdt.data & ((32w1 << NR_IMM_MEMBERS_SHIFT) - 1))
              | (((bit<32>)meta.nr_state.state[31:0]) << NR_IMM_MEMBERS_SHIFT)
            : hdr.immdt.data;
        ICRC_OF_HEADERS(meta.nr.icrc)
        ICRC_UNCOVER()
    }

    // ---- where a packet goes ----

    // First packet: its RETH says where the message sits in the job's window, and above it the message's owner
    // field (0: all-reduce; r + 1: reduce-scatter, rank r owns the shard; a job that does not scatter accepts 0
    // alone); remember both for the message's later packets.
    action learn_context() {
        bit<64> window = (hdr.reth.virtual_addr >> AGG_MESSAGE_BYTES_LOG2) & NR_CTX_WINDOW_MASK;
        bit<64> limit = ((bit<64>)meta.nr_state.credits) << 1;
        bool aligned = (hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1)) == 0
            && (hdr.reth.virtual_addr & ((1 << AGG_MESSAGE_BYTES_LOG2) - 1)) == 0
            && hdr.reth.dma_length == (1 << AGG_MESSAGE_BYTES_LOG2);
        meta.nr_state.context_ok = aligned && window < limit
            && (hdr.reth.virtual_addr >> NR_OWNER_VA_SHIFT) < (bit<64>)meta.nr_state.owners;
        meta.nr_state.window = (bit<8>)window;
        meta.nr_state.owner = (bit<8>)(hdr.reth.virtual_addr >> NR_OWNER_VA_SHIFT);
        nr_qp_context.read(meta.nr_state.entry, meta.nr_state.context);
        meta.nr_state.entry = meta.nr_state.context_ok
            ? NR_CTX_VALID | (((bit<32>)meta.nr_state.owner) << NR_CTX_OWNER_SHIFT)
              | (((bit<32>)meta.nr_state.window) << NR_MSG_BITS) | (meta.nr_state.msg & NR_MSG_MASK)
            : meta.nr_state.entry;
        nr_qp_context.write(meta.nr_state.context, meta.nr_state.entry);
        NR_LOCATE()
    }

    // Middle and last packets: the window index learned at their message's first packet.
    action recall_context() {
        nr_qp_context.read(meta.nr_state.entry, meta.nr_state.context);
        meta.nr_state.window = (bit<8>)((meta.nr_state.entry >> NR_MSG_BITS) & NR_CTX_WINDOW_MASK);
        meta.nr_state.owner = (bit<8>)((meta.nr_state.entry >> NR_CTX_OWNER_SHIFT) & NR_CTX_OWNER_MASK);
        meta.nr_state.context_ok = (meta.nr_state.entry & NR_CTX_VALID) != 0
            && (meta.nr_state.entry & NR_MSG_MASK) == meta.nr_state.msg;
        NR_LOCATE()
    }

    // An all-gather job's placeholder (its sender does not own the message: the headers alone, marked trimmed)
    // is a contribution of zeros: the payload it stands for, and the lengths and flag of a whole packet. It may
    // not complete a cell nor be answered (contribute holds it: BMv2 cannot grow a packet by a payload when it
    // sends it, packet_buffer.h's headroom is 512 bytes); its sender's retransmission, whole, does.
    #define NR_ZERO(q) hdr.agg.w##q = 0;
    action fill_placeholder() {
        hdr.agg.setValid();
        AGG_FOR_EACH_WORD(NR_ZERO)
        hdr.ipv4.total_len = hdr.ipv4.total_len + AGG_PAYLOAD_BYTES;
        hdr.udp.length = hdr.udp.length + AGG_PAYLOAD_BYTES;
        hdr.bth.resv7 = hdr.bth.resv7 & ~(7w1 << DLCP_TRIMMED_SHIFT);
        meta.nr_state.filled = 1;
    }

    // ---- the aggregation (one action: the whole read-modify-write is atomic) ----

    action contribute() {
        nr_cells.read(meta.nr_state.state, meta.nr_state.cell);
        nr_cells.read(meta.nr_state.twin, meta.nr_state.other_cell);
        bit<32> bitmap = (bit<32>)meta.nr_state.state[NR_CELL_MSG_SHIFT - 1:0];
        bit<32> msg = (bit<32>)meta.nr_state.state[NR_CELL_MSG_SHIFT + NR_MSG_BITS - 1:NR_CELL_MSG_SHIFT];
        bit<32> count = (bit<32>)meta.nr_state.state[NR_CELL_COUNT_SHIFT + NR_CELL_COUNT_BITS - 1:NR_CELL_COUNT_SHIFT];
        bit<32> mask = 32w1 << meta.nr_state.member_bit;
        bool mine = (bitmap & mask) != 0;
        bool fresh = bitmap == 0;
        bool same = msg == meta.nr_state.msg;
        // A placeholder is only ever a first contribution that does not complete the cell (else: held, refused).
        bool held = meta.nr_state.filled == 1 && (mine || (fresh ? 32w0 : count) + 1 == (bit<32>)meta.nr_state.members);
        bool behind = ((meta.nr_state.msg - msg) & NR_MSG_MASK) >= NR_MSG_HALF;
        bool late = meta.nr_state.late == 1;  // (judge_late, k-of-N jobs only: a field, never an expression here)
        bool add = !mine && !fresh && same && !held && !late;
        bool accept = (fresh && !held && !late) || add;
        // k of N: the cell closes (its sum leaves with the members it holds) on this member's packet, new or again
        bool closing = meta.nr_state.expired == 1 && (accept || mine);
        bit<32> taken = ((bit<32>)(bit<1>)accept) << meta.nr_state.member_bit;  // the member's bit if accepted, else 0
        // (closing: the count says complete, as the quorum's would; the bitmap says who is in)
        bit<32> new_count = closing ? (bit<32>)meta.nr_state.quorum : (fresh ? 32w0 : count) + (bit<32>)(bit<1>)accept;
        // One assignment (nested ?: would become a chain of predicated temporaries). p4c copies each
        // local's expression into every place that reads it; BMv2 evaluates narrow expressions far
        // more cheaply than it assigns a field, so they are not kept in metadata fields.
        meta.nr_state.outcome = 7w0 ++ (bit<1>)closing ++ (bit<1>)late ++ (bit<1>)held ++ (bit<1>)mine ++ (bit<1>)accept ++ (bit<1>)same
            ++ (bit<1>)(new_count == (bit<32>)meta.nr_state.quorum) ++ (bit<1>)behind
            ++ meta.nr_state.state[NR_CELL_FINAL_SHIFT:NR_CELL_FINAL_SHIFT];
        AGG_FOR_EACH_WORD(NR_ADD)
        // Values are written from a field updated in place, never from an expression: p4c makes an
        // extern call's expression argument a temporary (a metadata field of its own), and would
        // substitute a field's new value for the field if the value did not read the field itself.
        // The member has moved on from the other copy's older message. k of N: a late member too; and once a
        // cell completes, every member has (each of the quorum had the older result; a member left out may skip
        // messages whole, never clearing its bit): the other copy is free.
        meta.nr_state.twin = meta.nr_state.partial == 1 && (accept || closing)
                             && new_count == (bit<32>)meta.nr_state.quorum
            ? meta.nr_state.twin & ~((bit<64>)32w0xFFFFFFFF)
            : meta.nr_state.twin & ~((bit<64>)(((bit<32>)(bit<1>)(accept || late)) << meta.nr_state.member_bit));
        nr_cells.write(meta.nr_state.other_cell, meta.nr_state.twin);
        // Fresh: this message, count 0, not final, no member; then the contribution is added (or nothing).
        meta.nr_state.state = ((fresh ? ((bit<64>)meta.nr_state.msg) << NR_CELL_MSG_SHIFT : meta.nr_state.state)
                               + (((bit<64>)(bit<1>)accept) << NR_CELL_COUNT_SHIFT)) | (bit<64>)taken;
        meta.nr_state.state = closing
            ? (meta.nr_state.state & ~(((bit<64>)((1 << NR_CELL_COUNT_BITS) - 1)) << NR_CELL_COUNT_SHIFT))
              | (((bit<64>)meta.nr_state.quorum) << NR_CELL_COUNT_SHIFT)
            : meta.nr_state.state;
        nr_cells.write(meta.nr_state.cell, meta.nr_state.state);
    }

    // k of N (a partial job: quorum below members, or a deadline; never on any other job), before contribute: is
    // the packet late? A member's message is in the sum or out of it whole, decided at its first packet: out when
    // that packet's cell was complete (or done and released); a later packet is out unless its member's bit is in
    // the first packet's cell for this message. And does it close its cell? The message's first cell closes on a
    // member's packet (a retransmission, or a contribution) once `deadline` has passed since the cell's first
    // contribution; every other cell of the message once its first cell has closed and it holds exactly the
    // members that one holds; never a packet whose contribution brings the cell to the quorum (a completion as
    // any other). In an action of its own: contribute copies its locals into every word's expressions.
    action judge_late() {
        nr_cells.read(meta.nr_state.state, meta.nr_state.cell);
        nr_cells.read(meta.nr_state.head, meta.nr_state.cell - (bit<32>)(hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1)));
        bit<32> mask = 32w1 << meta.nr_state.member_bit;
        bit<32> bitmap = (bit<32>)meta.nr_state.state[NR_CELL_MSG_SHIFT - 1:0];
        bit<32> msg = (bit<32>)meta.nr_state.state[NR_CELL_MSG_SHIFT + NR_MSG_BITS - 1:NR_CELL_MSG_SHIFT];
        bit<32> count = (bit<32>)meta.nr_state.state[NR_CELL_COUNT_SHIFT + NR_CELL_COUNT_BITS - 1:NR_CELL_COUNT_SHIFT];
        bool same = msg == meta.nr_state.msg;
        bool behind = ((meta.nr_state.msg - msg) & NR_MSG_MASK) >= NR_MSG_HALF;
        bool in_head = (((bit<32>)meta.nr_state.head[NR_CELL_MSG_SHIFT - 1:0]) & mask) != 0
            && (bit<32>)meta.nr_state.head[NR_CELL_MSG_SHIFT + NR_MSG_BITS - 1:NR_CELL_MSG_SHIFT] == meta.nr_state.msg;
        bool first = (hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1)) == 0;
        meta.nr_state.late = (bit<8>)(bit<1>)((bitmap & mask) == 0
            && (first
                ? (bitmap == 0 ? same || behind : same && count >= (bit<32>)meta.nr_state.quorum)
                : !in_head));
        bit<32> now = (bit<32>)std_meta.ingress_global_timestamp;
        nr_cell_started.read(meta.nr_state.started, meta.nr_state.cell);
        bit<32> head_count = (bit<32>)meta.nr_state.head[NR_CELL_COUNT_SHIFT + NR_CELL_COUNT_BITS - 1:NR_CELL_COUNT_SHIFT];
        bool head_closed = (bit<32>)meta.nr_state.head[NR_CELL_MSG_SHIFT + NR_MSG_BITS - 1:NR_CELL_MSG_SHIFT]
            == meta.nr_state.msg && head_count >= (bit<32>)meta.nr_state.quorum;
        meta.nr_state.expired = (bit<8>)(bit<1>)(meta.nr_state.late == 0 && meta.nr_state.deadline != 0
            && (same || bitmap == 0)
            && (bitmap == 0 ? 32w0 : count) + (bit<32>)(bit<1>)((bitmap & mask) == 0) < (bit<32>)meta.nr_state.quorum
            && (first
                ? bitmap != 0 && now - meta.nr_state.started >= meta.nr_state.deadline
                : head_closed && (bit<32>)meta.nr_state.head[NR_CELL_MSG_SHIFT - 1:0] == (bitmap | mask)));
        // a fresh cell's first contribution starts its clock (a packet that is not added leaves it to the next)
        meta.nr_state.started = bitmap == 0 ? now : meta.nr_state.started;
        nr_cell_started.write(meta.nr_state.cell, meta.nr_state.started);
    }

    // A parent's result: store it in the cell (if it is for the cell's message) and mark it final.
    // Once: a second copy of a result the cell already holds (the parent's answer to a partial that a
    // local worker's retransmission sent up again while the result was on its way down) is not sent
    // to the local receivers again. They got the first copy; sent again, it would put a duplicate on
    // every local receiver's link for one worker's retransmission (docs/netreduce.md, "Loss").
    action store_result() {
        nr_cells.read(meta.nr_state.state, meta.nr_state.cell);
        bool current = (bit<32>)meta.nr_state.state[NR_CELL_MSG_SHIFT + NR_MSG_BITS - 1:NR_CELL_MSG_SHIFT]
            == meta.nr_state.msg;
        bool fin = meta.nr_state.state[NR_CELL_FINAL_SHIFT:NR_CELL_FINAL_SHIFT] == 1;
        // (One ?: : a nested one would be a predicated temporary.)
        meta.nr_state.outcome = current ? NR_OUT_COMPLETE + (((bit<16>)(bit<1>)fin) << 1) : NR_OUT_STALE;
        AGG_FOR_EACH_WORD(NR_STORE)
        meta.nr_state.state = meta.nr_state.state | (((bit<64>)(bit<1>)current) << NR_CELL_FINAL_SHIFT);
        nr_cells.write(meta.nr_state.cell, meta.nr_state.state);
    }

    // ---- bookkeeping ----

    // The packet's events (NR_EVENT), counted once its handling is done.
    action tally() {
        nr_job_events.count(meta.nr_state.job_event0);
        nr_port_events.count(meta.nr_state.port_event0);
        nr_job_events.count(meta.nr_state.job_event1);
        nr_port_events.count(meta.nr_state.port_event1);
        nr_job_events.count(meta.nr_state.job_event2);
        nr_port_events.count(meta.nr_state.port_event2);
    }

    action refuse(bit<32> event) {
        NR_EVENT(0, event)
        meta.nr.consumed = true;
        drop_with_reason(meta, std_meta, DROP_NETREDUCE_REFUSED);
    }

    // Corrupted on the way: nothing of it may be used; its sender's retransmission completes the cell.
    action refuse_corrupted() {
        NR_EVENT(0, NR_EV_BAD_ICRC)
        meta.nr.consumed = true;
        drop_with_reason(meta, std_meta, DROP_BAD_ICRC);
    }

    action emit(bit<16> group) {
        std_meta.mcast_grp = group;
        meta.nr.emit = true;
        meta.nr.consumed = true;
        meta.nr.job = meta.nr_state.job;
        meta.nr_copy.setValid();
        meta.nr_copy.owner = meta.nr_state.owner | (meta.nr_state.gather << 7);
    }

    action absorb() {
        meta.nr.consumed = true;
        mark_to_drop(std_meta);
    }

    // ---- what a contribution's verdict does ----

    action absorbed() {
        NR_EVENT(0, NR_EV_CONTRIBUTION)
        absorb();
    }

    action completed() {
        NR_EVENT(0, NR_EV_CONTRIBUTION)
        NR_EVENT(1, NR_EV_COMPLETION)
        emit(meta.nr_state.group_base);
    }

    // k of N: the cell closes with fewer than the quorum (its deadline passed): its sum to every receiver, as a
    // completion's; the packet was a contribution (added) or a member's packet again (not added: it carries the sum).
    action closed_adding() {
        NR_EVENT(0, NR_EV_CONTRIBUTION)
        NR_EVENT(1, NR_EV_COMPLETION)
        NR_EVENT(2, NR_EV_DEADLINE)
        emit(meta.nr_state.group_base);
    }

    action closed_again() {
        NR_EVENT(0, NR_EV_COMPLETION)
        NR_EVENT(1, NR_EV_DEADLINE)
        emit(meta.nr_state.group_base);
    }

    // A leaf's local sum is complete: it goes up to the parent.
    action completed_up() {
        NR_EVENT(0, NR_EV_CONTRIBUTION)
        NR_EVENT(1, NR_EV_COMPLETION)
        NR_EVENT(2, NR_EV_PARTIAL_UP)
        emit(meta.nr_state.group_base + NR_GROUP_UP);
    }

    // A retransmission for a complete cell: answered with the result on that connection only.
    action answer() {
        NR_EVENT(0, NR_EV_RETRANSMITTED_RESULT)
        emit(meta.nr_state.group_base + NR_GROUP_PEER_BASE + (bit<16>)meta.nr_state.peer_index);
    }

    // k of N: a late contribution to a cell that holds its message's sum: the sum, on that connection only (its
    // receiver has it already, and ACKs the late sender).
    action answer_late() {
        NR_EVENT(0, NR_EV_LATE_ANSWERED)
        emit(meta.nr_state.group_base + NR_GROUP_PEER_BASE + (bit<16>)meta.nr_state.peer_index);
    }

    // A retransmission at a leaf whose cell holds the local partial (no result yet): the partial goes up again.
    action resend_up() {
        NR_EVENT(0, NR_EV_PARTIAL_UP)
        emit(meta.nr_state.group_base + NR_GROUP_UP);
    }

    // A parent's result for the cell's current message: to every local receiver.
    action result_down() {
        NR_EVENT(0, NR_EV_RESULT_DOWN)
        emit(meta.nr_state.group_base);
    }

    table nr_verdicts {
        key = {
            meta.nr_state.outcome: ternary;
            meta.nr_state.role: ternary;
        }
        actions = {
            absorbed;
            completed;
            completed_up;
            closed_adding;
            closed_again;
            answer;
            answer_late;
            resend_up;
            refuse;
        }
        default_action = refuse(NR_EV_NO_CREDIT);
        // First match wins (entries are in priority order).
        const entries = {
            (NR_V_HELD &&& NR_V_HELD, _) : refuse(NR_EV_PLACEHOLDER_LAST);
            ((NR_V_CLOSING | NR_V_ACCEPT) &&& (NR_V_CLOSING | NR_V_ACCEPT), _) : closed_adding();
            ((NR_V_CLOSING | NR_V_MINE) &&& (NR_V_CLOSING | NR_V_MINE), _) : closed_again();
            ((NR_V_LATE | NR_V_SAME | NR_V_COMPLETE) &&& (NR_V_LATE | NR_V_SAME | NR_V_COMPLETE), _) : answer_late();
            (NR_V_LATE &&& NR_V_LATE, _) : refuse(NR_EV_LATE);
            ((NR_V_MINE | NR_V_SAME | NR_V_COMPLETE) &&& (NR_V_MINE | NR_V_SAME | NR_V_COMPLETE | NR_V_FINAL), NR_ROLE_LEAF &&& 0xFF) : resend_up();
            ((NR_V_MINE | NR_V_SAME | NR_V_COMPLETE) &&& (NR_V_MINE | NR_V_SAME | NR_V_COMPLETE), _) : answer();
            ((NR_V_MINE | NR_V_SAME) &&& (NR_V_MINE | NR_V_SAME), _) : refuse(NR_EV_DUPLICATE);
            (NR_V_MINE &&& NR_V_MINE, _) : refuse(NR_EV_STALE);
            ((NR_V_ACCEPT | NR_V_COMPLETE) &&& (NR_V_ACCEPT | NR_V_COMPLETE), NR_ROLE_LEAF &&& 0xFF) : completed_up();
            ((NR_V_ACCEPT | NR_V_COMPLETE) &&& (NR_V_ACCEPT | NR_V_COMPLETE), _) : completed();
            (NR_V_ACCEPT &&& NR_V_ACCEPT, _) : absorbed();
            (NR_V_BEHIND &&& NR_V_BEHIND, _) : refuse(NR_EV_STALE);
        }
    }

    apply {
        // (meta.nr starts zeroed, as BMv2 gives every packet its metadata: not consumed, no emit.
        // meta.nr_state is valid, zeroed, only for a member's packet or one that claims a job: NR_BEGIN.)
        // No `return`: p4c makes each one a flag that every later node tests, and BMv2 pays per node.
        if (hdr.bth.opcode != ROCE_ACKNOWLEDGE) {  // ACKs and NAKs are end to end: routed as they are
            if (!nr_members.apply().hit) {
                // Not a member: refused if it claims a job from a host port, else plain RoCE traffic.
                if (hdr.reth.isValid()) {
                    nr_job_keys.apply();
                }
                if (!meta.nr_state.isValid()) {  // (valid: the packet claims a job)
                    nr_job_connections.apply();
                }
                if (meta.nr_state.isValid()) {  // (not `isValid() && apply().hit`: p4c makes both temporaries)
                    if (nr_host_ports.apply().hit) {
                        refuse(NR_EV_NOT_MEMBER);
                    }
                }
            } else if (!nr_jobs.apply().hit) {
                refuse(NR_EV_NOT_MEMBER);
            } else if (!(hdr.bth.opcode == ROCE_WRITE_FIRST || hdr.bth.opcode == ROCE_WRITE_MIDDLE
                         || hdr.bth.opcode == ROCE_WRITE_LAST_IMM)
                       || (!hdr.agg.isValid() && !(meta.nr_state.gather == 1 && meta.nr_state.kind == NR_MEMBER_CONTRIBUTOR
                                                   && hdr.icrc.isValid() && ((hdr.bth.resv7 >> DLCP_TRIMMED_SHIFT) & 1) == 1))) {
                // (Headers alone only as an all-gather job's placeholder, from a contributor: parsed with its ICRC,
                // marked trimmed.)
                refuse(NR_EV_MALFORMED);
            } else {
                // Before any register is read or written (learn_context writes the per-QP context).
                check_icrc();
                if (!meta.nr_state.icrc_ok) {
                    refuse_corrupted();
                } else {
                    if (!hdr.agg.isValid()) {
                        fill_placeholder();
                    }
                    if (hdr.reth.isValid()) {  // WRITE First (the parser extracts its RETH)
                        learn_context();
                        if (!meta.nr_state.context_ok) {
                            refuse(NR_EV_MALFORMED);
                        }
                    } else {
                        recall_context();
                        if (!meta.nr_state.context_ok) {
                            refuse(NR_EV_NO_CONTEXT);
                        }
                    }
                    if (meta.nr_state.context_ok) {
                        if (meta.nr_state.cell >= AGG_CELLS || meta.nr_state.other_cell >= AGG_CELLS) {
                            refuse(NR_EV_MALFORMED);
                        } else if (meta.nr_state.kind == NR_MEMBER_PARENT) {
                            store_result();
                            if (meta.nr_state.outcome == NR_OUT_COMPLETE) {
                                result_down();
                            } else if (meta.nr_state.outcome == NR_OUT_DUPLICATE) {
                                refuse(NR_EV_DUPLICATE);
                            } else {
                                refuse(NR_EV_STALE);
                            }
                        } else {
                            if (meta.nr_state.partial == 1) {
                                judge_late();
                            }
                            contribute();
                            nr_verdicts.apply();
                        }
                        if (meta.nr.emit) {
                            canonical_icrc();
                        }
                    }
                }
            }
            if (meta.nr.consumed) {
                tally();
            }
            meta.nr_state.setInvalid();
        }
    }
}

// Egress: rewrite a result (or partial) copy into the connection its egress_rid names, and give
// it that connection's ICRC: the canonical ICRC ingress computed, plus the connection's delta
// for the packet's kind (first, middle or last: their lengths differ), installed with it.
control NetReduceEgress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t std_meta) {

    action rewrite(ipv4_addr_t src_addr, ipv4_addr_t dst_addr, mac_addr_t dst_mac, qpn_t dest_qp, bit<16> src_port,
                   bit<32> icrc_first, bit<32> icrc_middle, bit<32> icrc_last, bit<8> receiver) {
        meta.nr_copy.receiver = receiver;
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.ipv4.ttl = 64;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.udp.src_port = src_port;
        hdr.udp.checksum = 0;
        hdr.bth.dest_qp = dest_qp;
        hdr.bth.fecn_becn = 0;
        hdr.ipv4.dscp = 0;
        hdr.ipv4.ecn = 0;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.icrc.value = meta.nr.icrc ^ (hdr.reth.isValid() ? icrc_first : (hdr.immdt.isValid() ? icrc_last : icrc_middle));
        meta.routed = true;
    }

    action drop_unconfigured() {
        drop_with_reason(meta, std_meta, DROP_NETREDUCE_REFUSED);
    }

    table nr_connections {
        key = {
            meta.nr.job: exact;
            std_meta.egress_rid: exact;
        }
        actions = {
            rewrite;
            drop_unconfigured;
        }
        default_action = drop_unconfigured();
        size = AGG_MAX_QPS;
    }

    apply {
        nr_connections.apply();
    }
}

#endif
