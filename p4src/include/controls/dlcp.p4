/*
 * DLCP: per-packet priority by layer and magnitude class, bounded-loss selective dropping,
 * per-packet spraying. The design, and why the bottleneck is an HTB tree on the egress
 * veth fed by the DSCP written here, is docs/dlcp.md.
 */
#ifndef _GRADSWITCH_DLCP_P4_
#define _GRADSWITCH_DLCP_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

// Ingress: the job's features, the packet's priority queue and droppability, the spray key.
control DlcpIngress(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {

    action set_features(bit<1> priority, bit<1> drop, bit<1> spray) {
        meta.dlcp.priority_on = priority;
        meta.dlcp.drop_on = drop;
        meta.dlcp.spray_on = spray;
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

    apply {
        // Applied to RoCE packets only (hdr.bth valid: gradswitch.p4); meta.dlcp starts zeroed
        // (BMv2 zeroes every packet's metadata): priority 0, no spray key.
        meta.dlcp.job = (bit<8>)(hdr.bth.dest_qp >> QPN_JOB_SHIFT);
        if (dlcp_jobs.apply().hit) {
            bool ack = hdr.bth.opcode == ROCE_ACKNOWLEDGE;
            if (meta.dlcp.priority_on == 1) {
                if (ack) {
                    set_priority(DLCP_ACK_PRIORITY);
                } else {
                    dlcp_classes.apply();
                }
            }
            meta.dlcp.droppable = meta.dlcp.drop_on == 1 && !ack
                && ((hdr.bth.resv7 >> DLCP_DROPPABLE_SHIFT) & 1) == 1;
            if (meta.dlcp.spray_on == 1) {
                meta.dlcp.spray_key = (bit<32>)hdr.bth.psn;
            }
        }
    }
}

// Egress: the port's virtual queue, the selective drop, and the DSCP the HTB tree schedules on.
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

    action set_rate(bit<32> bytes_per_1024us) {
        meta.dlcp.port_rate = bytes_per_1024us;
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
        meta.dlcp.threshold = bytes;
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
    action update_queue() {
        bit<32> index = (bit<32>)std_meta.egress_port * PRIORITY_QUEUES + (bit<32>)meta.dlcp.priority;
        bit<32> bytes;
        bit<48> last;
        dlcp_vq_bytes.read(bytes, index);
        dlcp_vq_time.read(last, index);
        bit<48> now = std_meta.egress_global_timestamp;
        bit<64> drained = ((bit<64>)meta.dlcp.port_rate * (bit<64>)(now - last)) >> DLCP_RATE_SHIFT;
        bit<32> current = (bit<64>)bytes > drained ? (bit<32>)((bit<64>)bytes - drained) : 32w0;
        meta.dlcp.queue = current;
        meta.dlcp.drop_now = meta.dlcp.droppable && current >= meta.dlcp.threshold;  // threshold 0: always
        dlcp_vq_bytes.write(index, meta.dlcp.drop_now ? current : current + std_meta.packet_length);
        dlcp_vq_time.write(index, now);
    }

    action count_event(bit<32> event) {
        dlcp_events.count((bit<32>)meta.dlcp.job * DLCP_EVENTS + event);
    }

    apply {
        meta.dlcp.threshold = 0xFFFFFFFF;
        meta.dlcp.drop_now = false;
        if (dlcp_port_rates.apply().hit) {
            dlcp_drop_thresholds.apply();
            update_queue();
        }
        if (meta.dlcp.drop_now) {
            count_event(DLCP_EV_DROPPED);
            drop_with_reason(meta, std_meta, DROP_DLCP);
        } else {
            if (meta.dlcp.droppable) {
                count_event(DLCP_EV_KEPT);
            }
            if (meta.dlcp.classified) {
                count_event(DLCP_EV_CLASSIFIED);
                hdr.ipv4.dscp = ((bit<6>)meta.dlcp.priority) << 3;
            }
        }
    }
}

#endif
