/*
 * DLCP: per-packet priority by layer and magnitude class, selective dropping by payload trimming,
 * per-packet spraying; and the RoCE class, the baseline DLCP is measured against (every RoCE v2
 * packet in one strict-priority class above bulk traffic). The design, and why the bottleneck is
 * an HTB tree on the egress veth fed by the DSCP written here, is docs/dlcp.md.
 */
#ifndef _GRADSWITCH_DLCP_P4_
#define _GRADSWITCH_DLCP_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"
#include "icrc.p4"

// Ingress: the RoCE class, the job's features, the packet's priority queue and droppability, the spray key.
control DlcpIngress(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {

    // (Three bits of one field: each field of the metadata is zeroed for every packet BMv2 receives.)
    action set_features(bit<1> priority, bit<1> drop, bit<1> spray) {
        meta.dlcp.features = (bit<8>)(priority ++ drop ++ spray);
    }

    table dlcp_jobs {
        key = {
            meta.dlcp.job: exact;
        }
        actions = {
            set_features;
            NoAction;
        }
        default_action = NoAction();
        size = DLCP_MAX_JOBS;
    }

    action set_priority(bit<3> priority) {
        meta.dlcp.priority = priority;
        meta.dlcp.classified = true;
        std_meta.priority = priority;
    }

    // (job, BTH.resv7 class bits) -> strict-priority queue.
    table dlcp_classes {
        key = {
            meta.dlcp.job: exact;
            hdr.bth.resv7: ternary;
        }
        actions = {
            set_priority;
            NoAction;
        }
        default_action = NoAction();
        size = DLCP_CLASS_RULES;
    }

    // Every RoCE v2 packet (data and ACKs, of any job) in one strict-priority class above bulk traffic: how
    // RoCE is deployed, the baseline DLCP is compared with. A DLCP job's own priorities (below) override it.
    action set_roce_class() {
        set_priority(ROCE_CLASS_PRIORITY);
    }

    // One entry (UDP destination port ROCE_V2_UDP_PORT -> set_roce_class) while the RoCE class is on, none when off.
    table roce_class {
        key = {
            hdr.udp.dst_port: exact;
        }
        actions = {
            set_roce_class;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    apply {
        // Applied to RoCE packets only (hdr.bth valid: gradswitch.p4); meta.dlcp starts zeroed
        // (BMv2 zeroes every packet's metadata): priority 0, no spray key.
        meta.dlcp.job = (bit<8>)(hdr.bth.dest_qp >> QPN_JOB_SHIFT);
        roce_class.apply();
        if (dlcp_jobs.apply().hit) {
            if (((hdr.bth.resv7 >> DLCP_TRIMMED_SHIFT) & 1) == 1) {
                // A drop notification (a switch on the way cut its payload): first out, never dropped nor trimmed
                // again (not droppable).
                set_priority(DLCP_ACK_PRIORITY);
            } else {
                bool ack = hdr.bth.opcode == ROCE_ACKNOWLEDGE;
                if ((meta.dlcp.features & DLCP_F_PRIORITY) != 0) {
                    if (ack) {
                        set_priority(DLCP_ACK_PRIORITY);
                    } else {
                        dlcp_classes.apply();
                    }
                }
                meta.dlcp.droppable = (meta.dlcp.features & DLCP_F_DROP) != 0 && !ack
                    && ((hdr.bth.resv7 >> DLCP_DROPPABLE_SHIFT) & 1) == 1;
            }
            if ((meta.dlcp.features & DLCP_F_SPRAY) != 0) {
                meta.dlcp.spray_key = (bit<32>)hdr.bth.psn;
            }
        }
    }
}

// What a trimmed packet keeps: Ethernet, IPv4, UDP, BTH, the RETH or ImmDt it has, and a fresh ICRC.
#define TRIM_UDP_LENGTH (8 + 12 + 4)
#define TRIM_IPV4_LENGTH (20 + TRIM_UDP_LENGTH)
#define TRIM_FRAME_BYTES (14 + TRIM_IPV4_LENGTH)
#define TRIM_RETH 16
#define TRIM_IMMDT 4

// Egress: the port's virtual queue, the selective drop (the payload is cut, the headers go on as a drop
// notification), and the DSCP the HTB tree schedules on.
control DlcpEgress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t std_meta) {

    // Events (DLCP_EV_*) per job.
    counter(DLCP_MAX_JOBS * DLCP_EVENTS, CounterType.packets) dlcp_events;
    // Virtual queue per (egress port, priority): bytes, and when it was last updated (us). Under
    // strict priority a packet waits behind its own class (higher ones are short), so each class
    // of a port keeps its own queue, drained at the port's rate.
    register<bit<32>>(MAX_PORTS * PRIORITY_QUEUES) dlcp_vq_bytes;
    register<bit<48>>(MAX_PORTS * PRIORITY_QUEUES) dlcp_vq_time;

    // The port's drain rate, and the packet's virtual queue: (egress port, priority). (Computed here, not
    // where the queue's registers are read and written: p4c would make each use a temporary of its own.)
    action set_rate(bit<32> bytes_per_1024us) {
        meta.dlcp_state.setValid();
        meta.dlcp_state.port_rate = bytes_per_1024us;
        meta.dlcp_state.vq = (bit<32>)std_meta.egress_port * PRIORITY_QUEUES + (bit<32>)meta.dlcp.priority;
        meta.dlcp_state.threshold = 0xFFFFFFFF;  // unless dlcp_drop_thresholds has one for the priority
    }

    // Ports whose queue DLCP watches, with their drain rate (the link rate).
    table dlcp_port_rates {
        key = {
            std_meta.egress_port: exact;
        }
        actions = {
            set_rate;
            NoAction;
        }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    action set_threshold(bit<32> bytes) {
        meta.dlcp_state.threshold = bytes;
    }

    table dlcp_drop_thresholds {
        key = {
            meta.dlcp.priority: exact;
        }
        actions = {
            set_threshold;
            NoAction;
        }
        default_action = NoAction();
        size = PRIORITY_QUEUES;
    }

    // Drain the class's virtual queue to now, decide the drop, and add the packet if kept (one action).
    // The queue is updated in place in meta.dlcp_state.queue and written from it (an expression written to a
    // register would be a temporary, a metadata field of its own).
    action update_queue() {
        dlcp_vq_bytes.read(meta.dlcp_state.queue, meta.dlcp_state.vq);
        dlcp_vq_time.read(meta.dlcp_state.last, meta.dlcp_state.vq);
        bit<64> drained = ((bit<64>)meta.dlcp_state.port_rate
                           * (bit<64>)(std_meta.egress_global_timestamp - meta.dlcp_state.last)) >> DLCP_RATE_SHIFT;
        meta.dlcp_state.queue = (bit<64>)meta.dlcp_state.queue > drained
            ? (bit<32>)((bit<64>)meta.dlcp_state.queue - drained) : 32w0;
        // threshold 0: always
        meta.dlcp.drop_now = meta.dlcp.droppable && meta.dlcp_state.queue >= meta.dlcp_state.threshold;
        meta.dlcp_state.queue = meta.dlcp.drop_now ? meta.dlcp_state.queue
            : meta.dlcp_state.queue + std_meta.packet_length;
        dlcp_vq_bytes.write(meta.dlcp_state.vq, meta.dlcp_state.queue);
        dlcp_vq_time.write(meta.dlcp_state.vq, std_meta.egress_global_timestamp);
        meta.dlcp_state.setInvalid();
    }

    // DLCP's selective drop: the payload goes, the headers go on as a drop notification (NDP's packet trimming).
    // IPv4 and UDP lengths are the trimmed packet's, BTH.pad_count 0, the TRIMMED bit set in resv7 (the droppable
    // bit stays), DSCP CS DLCP_ACK_PRIORITY; a fresh ICRC covers exactly those headers and is emitted after them
    // (hdr.icrc), and truncate() cuts what follows it: the payload and the old ICRC. The ICRC is computed by
    // making the packet's headers what it covers (controls/icrc.p4): Ethernet and the variant fields it
    // overwrites are kept in meta.dlcp_state meanwhile and put back. (One action: a table's const entries give
    // it the lengths of each shape, so that no length is computed, which p4c would make a temporary.)
    action trim(bit<16> ipv4_length, bit<16> udp_length, bit<32> frame_bytes) {
        meta.dlcp_state.setValid();
        meta.dlcp_state.eth_dst = hdr.ethernet.dst_addr;
        meta.dlcp_state.eth_src = hdr.ethernet.src_addr;
        meta.dlcp_state.ttl = hdr.ipv4.ttl;
        meta.dlcp_state.ecn = hdr.ipv4.ecn;
        meta.dlcp_state.fecn_becn = hdr.bth.fecn_becn;
        hdr.agg.setInvalid();  // (a payload of exactly an aggregation packet's size was parsed into it)
        hdr.ipv4.total_len = ipv4_length;
        hdr.udp.length = udp_length;
        hdr.bth.pad_count = 0;
        hdr.bth.resv7 = hdr.bth.resv7 | (1 << DLCP_TRIMMED_SHIFT);
        ICRC_COVER()
        ICRC_OF_HEADERS(meta.dlcp_state.icrc)
        ICRC_UNCOVER()
        hdr.icrc.value = meta.dlcp_state.icrc;
        hdr.ethernet.dst_addr = meta.dlcp_state.eth_dst;
        hdr.ethernet.src_addr = meta.dlcp_state.eth_src;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.ipv4.dscp = DLCP_ACK_PRIORITY << 3;
        hdr.ipv4.ecn = meta.dlcp_state.ecn;
        hdr.ipv4.ttl = meta.dlcp_state.ttl;
        hdr.udp.checksum = 0;  // (none: RoCE v2 senders send 0, and a checksum of the old payload would be wrong)
        hdr.bth.fecn_becn = meta.dlcp_state.fecn_becn;
        truncate(frame_bytes);
        meta.dlcp_state.setInvalid();
    }

    // The trimmed lengths of each shape of packet: with or without a RETH (WRITE First and Only), an ImmDt (*_IMM).
    table dlcp_trim {
        key = {
            hdr.reth.isValid(): exact;
            hdr.immdt.isValid(): exact;
        }
        actions = {
            trim;
            NoAction;
        }
        const entries = {
            (false, false): trim(TRIM_IPV4_LENGTH, TRIM_UDP_LENGTH, TRIM_FRAME_BYTES);
            (true, false): trim(TRIM_IPV4_LENGTH + TRIM_RETH, TRIM_UDP_LENGTH + TRIM_RETH,
                                TRIM_FRAME_BYTES + TRIM_RETH);
            (false, true): trim(TRIM_IPV4_LENGTH + TRIM_IMMDT, TRIM_UDP_LENGTH + TRIM_IMMDT,
                                TRIM_FRAME_BYTES + TRIM_IMMDT);
            (true, true): trim(TRIM_IPV4_LENGTH + TRIM_RETH + TRIM_IMMDT, TRIM_UDP_LENGTH + TRIM_RETH + TRIM_IMMDT,
                               TRIM_FRAME_BYTES + TRIM_RETH + TRIM_IMMDT);
        }
        default_action = NoAction();
    }

    action count_event(bit<32> event) {
        dlcp_events.count((bit<32>)meta.dlcp.job * DLCP_EVENTS + event);
    }

    apply {
        // (meta.dlcp.drop_now starts false: BMv2 zeroes every packet's metadata.)
        if (dlcp_port_rates.apply().hit) {
            dlcp_drop_thresholds.apply();
            update_queue();
        }
        if (meta.dlcp.drop_now) {
            count_event(DLCP_EV_DROPPED);  // (its payload)
            dlcp_trim.apply();
        } else if (meta.dlcp.droppable || meta.dlcp.classified) {  // a classified packet (one test for the others)
            if (meta.dlcp.droppable) {
                count_event(DLCP_EV_KEPT);
            }
            if (meta.dlcp.classified) {
                if ((meta.dlcp.features & DLCP_F_PRIORITY) != 0) {  // by DLCP (not by the RoCE class alone)
                    count_event(DLCP_EV_CLASSIFIED);
                }
                hdr.ipv4.dscp = ((bit<6>)meta.dlcp.priority) << 3;
            }
        }
    }
}

#endif
