/*
 * FaultInjection: drop, or corrupt, a chosen fraction of the packets entering or
 * leaving a port (for loss experiments on kernels without netem, and for bit errors
 * on a link). A rule may be narrowed to one IP protocol and/or L4 destination port,
 * e.g. RoCE v2 only.
 *
 * Corrupting flips one bit of the packet after its checksums were computed by its
 * sender, as a bit error on the wire would: the lowest bit of an aggregation payload's
 * first word, else of a RoCE packet's PSN (both covered by the ICRC), else of the TCP or
 * UDP checksum. The IPv4 header is left alone: its checksum is recomputed on the way out.
 */
#ifndef _GRADSWITCH_FAULT_INJECTION_P4_
#define _GRADSWITCH_FAULT_INJECTION_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

// One instance matches on the ingress port, the other on the egress port.
control FaultInjection(in port_t port,
                       inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t std_meta) {

    // Drop with probability ppm / FAULT_SCALE.
    action drop_fraction(bit<32> ppm) {
        meta.fault.setValid();
        meta.fault.ppm = ppm;
    }

    // Flip a bit with probability ppm / FAULT_SCALE (the packet goes on).
    action corrupt_fraction(bit<32> ppm) {
        meta.fault.setValid();
        meta.fault.ppm = ppm;
        meta.fault.corrupt = true;
    }

    table faults {
        key = {
            port: exact;
            hdr.ipv4.protocol: ternary;
            meta.l4_dst_port: ternary;
        }
        actions = {
            drop_fraction;
            corrupt_fraction;
            NoAction;
        }
        default_action = NoAction();
        size = FAULT_TABLE_SIZE;
    }

    apply {
        // meta.fault is valid only when a rule matched (its actions make it valid, zeroed), and invalid
        // again once the draw decided: the egress instance sees what ingress left.
        faults.apply();
        if (meta.fault.isValid()) {
            random(meta.fault.draw, 32w0, (bit<32>)(FAULT_SCALE - 1));
            if (meta.fault.draw < meta.fault.ppm) {
                if (!meta.fault.corrupt) {
                    drop_with_reason(meta, std_meta, DROP_FAULT_INJECTED);
                } else if (hdr.agg.isValid()) {
                    hdr.agg.w0 = hdr.agg.w0 ^ 1;
                } else if (hdr.bth.isValid()) {
                    hdr.bth.psn = hdr.bth.psn ^ 1;
                } else if (hdr.tcp.isValid()) {
                    hdr.tcp.checksum = hdr.tcp.checksum ^ 1;
                } else if (hdr.udp.isValid()) {
                    hdr.udp.checksum = hdr.udp.checksum ^ 1;
                }
            }
            meta.fault.setInvalid();
        }
    }
}

#endif
