/*
 * L2Forwarding: non-IP Ethernet frames by destination MAC; broadcast is flooded
 * through a multicast group (egress prunes the copy for the ingress port).
 */
#ifndef _GRADSWITCH_L2_FORWARDING_P4_
#define _GRADSWITCH_L2_FORWARDING_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

control L2Forwarding(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {

    action forward(port_t port) {
        std_meta.egress_spec = port;
    }

    action flood() {
        std_meta.mcast_grp = BROADCAST_GROUP_ID;
    }

    action drop_unknown() {
        drop_with_reason(meta, std_meta, DROP_NO_ROUTE);
    }

    table mac_forwarding {
        key = {
            hdr.ethernet.dst_addr: exact;
        }
        actions = {
            forward;
            flood;
            drop_unknown;
        }
        default_action = drop_unknown();
        size = MAC_TABLE_SIZE;
    }

    apply {
        mac_forwarding.apply();
    }
}

#endif
