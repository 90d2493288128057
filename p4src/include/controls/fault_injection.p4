/*
 * FaultInjection: drop a chosen fraction of the packets entering or leaving a
 * port (for loss experiments on kernels without netem). A rule may be narrowed
 * to one IP protocol and/or L4 destination port, e.g. RoCE v2 only.
 */
#ifndef _GRADSWITCH_FAULT_INJECTION_P4_
#define _GRADSWITCH_FAULT_INJECTION_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

// One instance matches on the ingress port, the other on the egress port.
control FaultInjection(in port_t port,
                       in headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t std_meta) {

    // Drop with probability ppm / FAULT_SCALE.
    action drop_fraction(bit<32> ppm) {
        meta.fault_ppm = ppm;
    }

    table faults {
        key = {
            port: exact;
            hdr.ipv4.protocol: ternary;
            meta.l4_dst_port: ternary;
        }
        actions = {
            drop_fraction;
            NoAction;
        }
        default_action = NoAction();
        size = FAULT_TABLE_SIZE;
    }

    apply {
        meta.fault_ppm = 0;
        faults.apply();
        if (meta.fault_ppm != 0) {
            random(meta.fault_draw, 32w0, (bit<32>)(FAULT_SCALE - 1));
            if (meta.fault_draw < meta.fault_ppm) {
                drop_with_reason(meta, std_meta, DROP_FAULT_INJECTED);
            }
        }
    }
}

#endif
