/*
 * Ipv4Routing: longest-prefix match to a next hop or to an ECMP group whose
 * member is chosen by a hash of the flow's 5-tuple; TTL check and decrement.
 * SourceMacRewrite (egress): routed packets leave with the egress port's MAC.
 */
#ifndef _GRADSWITCH_L3_FORWARDING_P4_
#define _GRADSWITCH_L3_FORWARDING_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

control Ipv4Routing(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std_meta) {

    // Send to a directly known next hop (a local host or a neighbour switch), one hop less to live
    // (here, not in a node of its own after the tables: BMv2 pays for every node a packet meets).
    action set_next_hop(port_t port, mac_addr_t dst_mac) {
        std_meta.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        meta.routed = true;
    }

    // Spread flows over the group's `size` members by a hash of the 5-tuple (plus the PSN
    // for a DLCP job that sprays its packets).
    action set_ecmp_group(ecmp_group_t group, bit<16> size) {
        meta.ecmp_group = group;
        meta.flow_key.setValid();
        meta.flow_key.src_addr = hdr.ipv4.src_addr;
        meta.flow_key.dst_addr = hdr.ipv4.dst_addr;
        meta.flow_key.protocol = hdr.ipv4.protocol;
        meta.flow_key.l4_src_port = meta.l4_src_port;
        meta.flow_key.l4_dst_port = meta.l4_dst_port;
        meta.flow_key.spray_key = meta.dlcp.spray_key;
        hash(meta.ecmp_index, HashAlgorithm.crc16, (ecmp_index_t)0, meta.flow_key, size);
        meta.flow_key.setInvalid();
    }

    action drop_no_route() {
        drop_with_reason(meta, std_meta, DROP_NO_ROUTE);
    }

    table ipv4_routes {
        key = {
            hdr.ipv4.dst_addr: lpm;
        }
        actions = {
            set_next_hop;
            set_ecmp_group;
            drop_no_route;
        }
        default_action = drop_no_route();
        size = IPV4_ROUTES_SIZE;
    }

    table ecmp_members {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_index: exact;
        }
        actions = {
            set_next_hop;
            drop_no_route;
        }
        default_action = drop_no_route();
        size = ECMP_MEMBERS_SIZE;
    }

    apply {
        if (hdr.ipv4.ttl <= 1) {
            drop_with_reason(meta, std_meta, DROP_TTL_EXPIRED);
        } else {
            switch (ipv4_routes.apply().action_run) {
                set_ecmp_group: {
                    ecmp_members.apply();
                }
            }
        }
    }
}

control SourceMacRewrite(inout headers_t hdr,
                         in local_metadata_t meta,
                         in standard_metadata_t std_meta) {

    action set_source_mac(mac_addr_t mac) {
        hdr.ethernet.src_addr = mac;
    }

    table port_macs {
        key = {
            std_meta.egress_port: exact;
        }
        actions = {
            set_source_mac;
            NoAction;
        }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    apply {
        if (meta.routed) {
            port_macs.apply();
        }
    }
}

#endif
