/*
 * ArpResponder: the switch answers ARP requests for the hosts the controller knows.
 */
#ifndef _GRADSWITCH_ARP_P4_
#define _GRADSWITCH_ARP_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

control ArpResponder(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {

    // Turn the request into the reply the owner of target_ip would send, back out the ingress port.
    action answer(mac_addr_t target_mac) {
        std_meta.egress_spec = std_meta.ingress_port;
        hdr.arp.op = ARP_OP_REPLY;
        hdr.arp.target_mac = hdr.arp.sender_mac;
        // The two addresses swapped in place (a local would be a metadata field, zeroed for every packet).
        hdr.arp.sender_ip = hdr.arp.sender_ip ^ hdr.arp.target_ip;
        hdr.arp.target_ip = hdr.arp.target_ip ^ hdr.arp.sender_ip;
        hdr.arp.sender_ip = hdr.arp.sender_ip ^ hdr.arp.target_ip;
        hdr.arp.sender_mac = target_mac;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = target_mac;
    }

    // Unknown address: let the controller see the request.
    action punt_miss() {
        std_meta.egress_spec = CPU_PORT;
        meta.punt_reason = PUNT_ARP_MISS;
    }

    table arp_replies {
        key = {
            hdr.arp.target_ip: exact;
        }
        actions = {
            answer;
            punt_miss;
        }
        default_action = punt_miss();
        size = ARP_TABLE_SIZE;
    }

    apply {
        if (hdr.arp.op == ARP_OP_REQUEST) {
            arp_replies.apply();
        } else {
            drop_with_reason(meta, std_meta, DROP_ARP_OTHER);
        }
    }
}

#endif
