/*
 * Acl: ternary rules that punt a packet to the controller, copy it there
 * (clone session CPU_CLONE_SESSION_ID) or drop it; applied after forwarding.
 */
#ifndef _GRADSWITCH_ACL_P4_
#define _GRADSWITCH_ACL_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

control Acl(inout headers_t hdr,
            inout local_metadata_t meta,
            inout standard_metadata_t std_meta) {

    action punt_to_cpu() {
        std_meta.egress_spec = CPU_PORT;
        meta.punt_reason = PUNT_ACL;
        meta.dropped = false;
    }

    action copy_to_cpu() {
        meta.punt_reason = PUNT_ACL;
        clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION_ID, CPU_CLONE_FIELD_LIST);
    }

    action drop() {
        drop_with_reason(meta, std_meta, DROP_ACL);
    }

    table acl_rules {
        key = {
            std_meta.ingress_port: ternary;
            hdr.ethernet.ether_type: ternary;
            hdr.ipv4.src_addr: ternary;
            hdr.ipv4.dst_addr: ternary;
            hdr.ipv4.protocol: ternary;
            meta.l4_src_port: ternary;
            meta.l4_dst_port: ternary;
        }
        actions = {
            punt_to_cpu;
            copy_to_cpu;
            drop;
            NoAction;
        }
        default_action = NoAction();
        size = ACL_TABLE_SIZE;
    }

    apply {
        acl_rules.apply();
    }
}

#endif
