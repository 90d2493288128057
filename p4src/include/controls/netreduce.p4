/*
 * NetReduce: in-network gradient reduction on RoCE v2 Reliable Connections.
 * The design (packet format, slot life cycle, loss, credits, hierarchy) is docs/netreduce.md.
 *
 * NetReduceIngress identifies members' packets, checks their ICRC (a corrupted packet is
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

// Outcome of a packet at its cell.
const bit<8> NR_OUT_NONE = 0;
const bit<8> NR_OUT_ABSORBED = 1;   // added; the cell waits for more members
const bit<8> NR_OUT_COMPLETE = 2;   // added and complete (or a parent's result stored): emit
const bit<8> NR_OUT_RESEND = 3;     // retransmission for a complete cell: answer with what the cell holds
const bit<8> NR_OUT_DUPLICATE = 4;  // retransmission for a cell still waiting: drop
const bit<8> NR_OUT_NO_CREDIT = 5;  // the slot still holds an older message (over-sending): drop
const bit<8> NR_OUT_STALE = 6;      // the message is older than the slot's: drop

// Message numbers are PSN >> AGG_PACKETS_PER_MESSAGE_LOG2: the PSN's 24 bits less the packet offset.
#define NR_MSG_BITS (24 - AGG_PACKETS_PER_MESSAGE_LOG2)
#define NR_MSG_MASK ((1 << NR_MSG_BITS) - 1)
#define NR_MSG_HALF (1 << (NR_MSG_BITS - 1))
// Per-QP context entry: valid (bit 31) | window index (from bit NR_MSG_BITS) | message number (below it).
#define NR_CTX_VALID 0x80000000
#if NR_MSG_BITS + 8 > 31
#error "a per-QP context entry must hold the message number, an 8-bit window index and the valid bit"
#endif

// One word (64 int32 lanes) of a contribution: the cell's word masked by `keep` (all ones, or zero
// for a fresh cell) plus the payload's masked by `take` (all ones when the contribution is
// accepted, else zero), lane-wise: fresh -> the payload, add -> the sum, refused -> the cell as it
// was. The packet leaves carrying what the cell now holds. The value goes into the header field
// and the register is written from that field (p4c would copy-propagate a local holding the sum
// and evaluate the sum twice); masks instead of ?: keep it to one assignment per word (BMv2
// pays for every assignment of a wide field).
#define NR_ADD(q) \
    bit<AGG_WORD_BITS> v##q; \
    nr_values.read(v##q, vbase + q); \
    hdr.agg.w##q = AGG_LANE_ADD(v##q & keep, hdr.agg.w##q & take); \
    nr_values.write(vbase + q, hdr.agg.w##q);

// One word of a parent's result: stored when it is for the cell's current message.
#define NR_STORE(q) \
    bit<AGG_WORD_BITS> r##q; \
    nr_values.read(r##q, vbase + q); \
    nr_values.write(vbase + q, (hdr.agg.w##q & take) | (r##q & keep));

control NetReduceIngress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {


    // Events (NR_EV_*) per job and per ingress port.
    counter(AGG_MAX_JOBS * NR_EVENTS, CounterType.packets) nr_job_events;
    counter(MAX_PORTS * NR_EVENTS, CounterType.packets) nr_port_events;

    // The sums: AGG_WORDS_PER_PACKET wide words (AGG_ELEMENTS_PER_PACKET int32 lanes) per cell.
    register<bit<AGG_WORD_BITS>>(AGG_CELLS * AGG_WORDS_PER_PACKET) nr_values;
    // Members that contributed to the cell's current message.
    register<bit<32>>(AGG_CELLS) nr_bitmap;
    // How many.
    register<bit<32>>(AGG_CELLS) nr_count;
    // The cell's current message number.
    register<bit<32>>(AGG_CELLS) nr_message;
    // Leaf: the parent's result for the cell's message has arrived (the cell holds the result, not the partial).
    register<bit<8>>(AGG_CELLS) nr_final;
    // Per member QP, per message in flight (message mod AGG_MAX_CREDITS): window index learned at the first packet.
    register<bit<32>>(AGG_MAX_QPS * AGG_MAX_CREDITS) nr_qp_context;

    // ---- who is who ----

    action set_member(bit<8> job, bit<8> member_bit, bit<16> member_id, bit<8> peer_index, bit<8> kind) {
        meta.nr.job = job;
        meta.nr.member_bit = member_bit;
        meta.nr.member_id = member_id;
        meta.nr.peer_index = peer_index;
        meta.nr.kind = kind;
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

    action set_job(bit<32> base_cell, bit<8> credits, bit<8> members, bit<8> role, bit<16> group_base) {
        meta.nr.base_cell = base_cell;
        meta.nr.credits = credits;
        meta.nr.members = members;
        meta.nr.role = role;
        meta.nr.group_base = group_base;
    }

    table nr_jobs {
        key = {
            meta.nr.job: exact;
        }
        actions = {
            set_job;
            NoAction;
        }
        default_action = NoAction();
        size = AGG_MAX_JOBS;
    }

    action claim(bit<8> job) {
        meta.nr.claims = true;
        meta.nr.job = job;
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

    // ---- where a packet goes ----

    // First packet: its RETH says where the message sits in the job's window; remember it for the
    // message's later packets.
    action learn_context() {
        meta.nr.msg = (bit<32>)(hdr.bth.psn >> AGG_PACKETS_PER_MESSAGE_LOG2);
        bit<64> window = hdr.reth.virtual_addr >> AGG_MESSAGE_BYTES_LOG2;
        bit<64> limit = ((bit<64>)meta.nr.credits) << 1;
        bool aligned = (hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1)) == 0
            && (hdr.reth.virtual_addr & ((1 << AGG_MESSAGE_BYTES_LOG2) - 1)) == 0
            && hdr.reth.dma_length == (1 << AGG_MESSAGE_BYTES_LOG2);
        meta.nr.context_ok = aligned && window < limit;
        meta.nr.window = (bit<8>)window;
        bit<32> index = (bit<32>)meta.nr.member_id * AGG_MAX_CREDITS + (meta.nr.msg & (AGG_MAX_CREDITS - 1));
        bit<32> old;
        nr_qp_context.read(old, index);
        bit<32> entry = NR_CTX_VALID | (((bit<32>)meta.nr.window) << NR_MSG_BITS) | (meta.nr.msg & NR_MSG_MASK);
        nr_qp_context.write(index, meta.nr.context_ok ? entry : old);
    }

    // Middle and last packets: the window index learned at their message's first packet.
    action recall_context() {
        meta.nr.msg = (bit<32>)(hdr.bth.psn >> AGG_PACKETS_PER_MESSAGE_LOG2);
        bit<32> index = (bit<32>)meta.nr.member_id * AGG_MAX_CREDITS + (meta.nr.msg & (AGG_MAX_CREDITS - 1));
        bit<32> entry;
        nr_qp_context.read(entry, index);
        meta.nr.window = (bit<8>)(entry >> NR_MSG_BITS);
        meta.nr.context_ok = (entry & NR_CTX_VALID) != 0 && (entry & NR_MSG_MASK) == meta.nr.msg;
    }

    // The packet's cell, and the same position in the slot's other shadow copy.
    action locate() {
        bit<32> offset = (bit<32>)(hdr.bth.psn & (AGG_PACKETS_PER_MESSAGE - 1));
        bit<32> credits = (bit<32>)meta.nr.credits;
        bit<32> window = (bit<32>)meta.nr.window;
        bit<32> other = window >= credits ? window - credits : window + credits;
        meta.nr.cell = meta.nr.base_cell + (window << AGG_PACKETS_PER_MESSAGE_LOG2) + offset;
        meta.nr.other_cell = meta.nr.base_cell + (other << AGG_PACKETS_PER_MESSAGE_LOG2) + offset;
    }

    // ---- the aggregation (one action: the whole read-modify-write is atomic) ----

    action contribute() {
        bit<32> bitmap;
        bit<32> other;
        bit<32> count;
        bit<32> msg;
        bit<8> fin;
        nr_bitmap.read(bitmap, meta.nr.cell);
        nr_bitmap.read(other, meta.nr.other_cell);
        nr_count.read(count, meta.nr.cell);
        nr_message.read(msg, meta.nr.cell);
        nr_final.read(fin, meta.nr.cell);
        bit<32> mask = 32w1 << meta.nr.member_bit;
        bit<32> members = (bit<32>)meta.nr.members;
        bool mine = (bitmap & mask) != 0;
        bool same = msg == meta.nr.msg;
        bool fresh = !mine && bitmap == 0;
        bool add = !mine && bitmap != 0 && same;
        bool accept = fresh || add;
        bool behind = ((meta.nr.msg - msg) & NR_MSG_MASK) >= NR_MSG_HALF;
        bit<32> new_count = fresh ? 32w1 : (add ? count + 1 : count);
        meta.nr.outcome = mine
            ? (same ? (count == members ? NR_OUT_RESEND : NR_OUT_DUPLICATE) : NR_OUT_STALE)
            : (accept ? (new_count == members ? NR_OUT_COMPLETE : NR_OUT_ABSORBED)
                      : (behind ? NR_OUT_STALE : NR_OUT_NO_CREDIT));
        meta.nr.holds_result = fin == 1;
        nr_count.write(meta.nr.cell, new_count);
        nr_message.write(meta.nr.cell, fresh ? meta.nr.msg : msg);
        nr_final.write(meta.nr.cell, fresh ? 8w0 : fin);
        nr_bitmap.write(meta.nr.cell, accept ? (bitmap | mask) : bitmap);
        nr_bitmap.write(meta.nr.other_cell, accept ? (other & ~mask) : other);
        bit<32> vbase = meta.nr.cell << AGG_WORDS_PER_PACKET_LOG2;
        bit<AGG_WORD_BITS> keep = -((bit<AGG_WORD_BITS>)(bit<1>)!fresh);
        bit<AGG_WORD_BITS> take = -((bit<AGG_WORD_BITS>)(bit<1>)accept);
        AGG_FOR_EACH_WORD(NR_ADD)
    }

    // A parent's result: store it in the cell (if it is for the cell's message) and mark it final.
    action store_result() {
        bit<32> msg;
        bit<8> fin;
        nr_message.read(msg, meta.nr.cell);
        nr_final.read(fin, meta.nr.cell);
        bool current = msg == meta.nr.msg;
        meta.nr.outcome = current ? NR_OUT_COMPLETE : NR_OUT_STALE;
        nr_final.write(meta.nr.cell, current ? 8w1 : fin);
        bit<32> vbase = meta.nr.cell << AGG_WORDS_PER_PACKET_LOG2;
        bit<AGG_WORD_BITS> keep = -((bit<AGG_WORD_BITS>)(bit<1>)!current);
        bit<AGG_WORD_BITS> take = -((bit<AGG_WORD_BITS>)(bit<1>)current);
        AGG_FOR_EACH_WORD(NR_STORE)
    }

    // ---- bookkeeping ----

    action count_event(bit<32> event) {
        nr_job_events.count((bit<32>)meta.nr.job * NR_EVENTS + event);
        nr_port_events.count((bit<32>)std_meta.ingress_port * NR_EVENTS + event);
    }

    action refuse(bit<32> event) {
        count_event(event);
        meta.nr.consumed = true;
        drop_with_reason(meta, std_meta, DROP_NETREDUCE_REFUSED);
    }

    // Corrupted on the way: nothing of it may be used; its sender's retransmission completes the cell.
    action refuse_corrupted() {
        count_event(NR_EV_BAD_ICRC);
        meta.nr.consumed = true;
        drop_with_reason(meta, std_meta, DROP_BAD_ICRC);
    }

    action emit(bit<16> group) {
        std_meta.mcast_grp = group;
        meta.nr.emit = true;
        meta.nr.consumed = true;
    }

    action absorb() {
        meta.nr.consumed = true;
        mark_to_drop(std_meta);
    }

    apply {
        meta.nr.consumed = false;
        meta.nr.emit = false;
        bool first = hdr.bth.opcode == ROCE_WRITE_FIRST;
        bool later = hdr.bth.opcode == ROCE_WRITE_MIDDLE || hdr.bth.opcode == ROCE_WRITE_LAST_IMM;
        if (!hdr.bth.isValid() || hdr.bth.opcode == ROCE_ACKNOWLEDGE) {
            return;
        }
        if (!nr_members.apply().hit) {
            // Not a member: refused if it claims a job from a host port, else plain RoCE traffic.
            if (hdr.reth.isValid()) {
                nr_job_keys.apply();
            }
            if (!meta.nr.claims) {
                nr_job_connections.apply();
            }
            if (meta.nr.claims && nr_host_ports.apply().hit) {
                refuse(NR_EV_NOT_MEMBER);
            }
            return;
        }
        if (!nr_jobs.apply().hit) {
            refuse(NR_EV_NOT_MEMBER);
            return;
        }
        if (!hdr.agg.isValid() || !(first || later)) {
            refuse(NR_EV_MALFORMED);
            return;
        }
        // Before any register is read or written (learn_context writes the per-QP context).
        bit<32> wire_icrc;
        ROCE_ICRC(wire_icrc, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.udp.src_port, hdr.bth.dest_qp)
        if (wire_icrc != hdr.icrc.value) {
            refuse_corrupted();
            return;
        }
        if (first) {
            learn_context();
            if (!meta.nr.context_ok) {
                refuse(NR_EV_MALFORMED);
                return;
            }
        } else {
            recall_context();
            if (!meta.nr.context_ok) {
                refuse(NR_EV_NO_CONTEXT);
                return;
            }
        }
        locate();
        if (meta.nr.cell >= AGG_CELLS || meta.nr.other_cell >= AGG_CELLS) {
            refuse(NR_EV_MALFORMED);
            return;
        }
        if (meta.nr.kind == NR_MEMBER_PARENT) {
            store_result();
            if (meta.nr.outcome == NR_OUT_COMPLETE) {
                count_event(NR_EV_RESULT_DOWN);
                emit(meta.nr.group_base);
            } else {
                refuse(NR_EV_STALE);
            }
        } else {
            contribute();
            if (meta.nr.outcome == NR_OUT_COMPLETE) {
                count_event(NR_EV_CONTRIBUTION);
                count_event(NR_EV_COMPLETION);
                if (meta.nr.role == NR_ROLE_LEAF) {
                    count_event(NR_EV_PARTIAL_UP);
                    emit(meta.nr.group_base + NR_GROUP_UP);
                } else {
                    emit(meta.nr.group_base);
                }
            } else if (meta.nr.outcome == NR_OUT_ABSORBED) {
                count_event(NR_EV_CONTRIBUTION);
                absorb();
            } else if (meta.nr.outcome == NR_OUT_RESEND) {
                if (meta.nr.role == NR_ROLE_LEAF && !meta.nr.holds_result) {
                    count_event(NR_EV_PARTIAL_UP);
                    emit(meta.nr.group_base + NR_GROUP_UP);
                } else {
                    count_event(NR_EV_RETRANSMITTED_RESULT);
                    emit(meta.nr.group_base + NR_GROUP_PEER_BASE + (bit<16>)meta.nr.peer_index);
                }
            } else if (meta.nr.outcome == NR_OUT_DUPLICATE) {
                refuse(NR_EV_DUPLICATE);
            } else if (meta.nr.outcome == NR_OUT_NO_CREDIT) {
                refuse(NR_EV_NO_CREDIT);
            } else {
                refuse(NR_EV_STALE);
            }
        }
        if (meta.nr.emit) {
            // The ICRC of what the packet now carries, once, on the canonical connection (zero addresses,
            // port and QP): egress makes each copy's from it (controls/icrc.p4).
            ROCE_ICRC(meta.nr.icrc, 32w0, 32w0, 16w0, 24w0)
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
                   bit<32> icrc_first, bit<32> icrc_middle, bit<32> icrc_last) {
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.ipv4.ttl = 64;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.udp.src_port = src_port;
        hdr.udp.checksum = 0;
        hdr.bth.dest_qp = dest_qp;
        hdr.bth.fecn = 0;
        hdr.bth.becn = 0;
        hdr.bth.resv6 = 0;
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
