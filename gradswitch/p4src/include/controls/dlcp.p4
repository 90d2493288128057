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
#include "trim.p4"

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

    // DLCP's selective drop: the payload goes, the headers go on as a drop notification (controls/trim.p4).
    TrimPayload(true) trimmer;  // a notification: first out

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
            trimmer.apply(hdr, meta, std_meta);
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
