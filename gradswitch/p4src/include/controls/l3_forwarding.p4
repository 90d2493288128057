/*
 * Ipv4Routing: longest-prefix match to a next hop or to an ECMP group whose member is chosen by
 * a seeded hash of the flow's 5-tuple (ECMP), or per flowlet at random (LetFlow); TTL check and
 * decrement. SourceMacRewrite (egress): routed packets leave with the egress port's MAC.
 * docs/dlcp.md, "Load balancing".
 */
#ifndef _GRADSWITCH_L3_FORWARDING_P4_
#define _GRADSWITCH_L3_FORWARDING_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "../actions.p4"

#if (FLOWLET_SLOTS & (FLOWLET_SLOTS - 1)) != 0 || FLOWLET_SLOTS > 65536
#error "FLOWLET_SLOTS must be a power of two of at most 65536: a slot is low bits of a CRC-16"
#endif

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

    // Flowlet state per slot (the low bits of the 5-tuple's CRC-16 pick the slot; flows that share one share it):
    // when it last saw a packet (us, the low 32 bits of the timestamp), and its member.
    register<bit<32>>(FLOWLET_SLOTS) flowlet_time;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_member;

// The 5-tuple (and the spray key) into meta.flow_key, and its CRC-16 into meta.ecmp_index. (Not into a field of
// meta.flow_key: p4c would copy the header it hashes into a temporary header first, which every packet pays for.)
#define ECMP_CRC() \
        meta.flow_key.setValid(); \
        meta.flow_key.src_addr = hdr.ipv4.src_addr; \
        meta.flow_key.dst_addr = hdr.ipv4.dst_addr; \
        meta.flow_key.protocol = hdr.ipv4.protocol; \
        meta.flow_key.l4_src_port = meta.l4_src_port; \
        meta.flow_key.l4_dst_port = meta.l4_dst_port; \
        meta.flow_key.spray_key = meta.dlcp.spray_key; \
        hash(meta.ecmp_index, HashAlgorithm.crc16, 32w0, meta.flow_key, 32w0x10000);

// ... then the member: the CRC-16 times the multiplier (the controller's seed), bits 16..31 of the product, mod
// SIZE. ECMP_PLAIN_MULTIPLIER keeps the CRC-16 itself (member = CRC-16 mod SIZE); an odd multiplier is
// multiply-shift hashing, whose product's bits depend on the CRC's bits through the carries: each seed splits a
// set of flows over the members its own way. (A seed mixed into the CRC's input would not: a CRC is affine in
// its input, so it would only XOR every flow's hash with one constant, and flows that share a member would share
// one under every seed.)
#define ECMP_MEMBER(SIZE, MULTIPLIER) \
        meta.flow_key.mixed = (((bit<64>)meta.ecmp_index * (bit<64>)MULTIPLIER) >> 16) & 0xFFFF; \
        hash(meta.ecmp_index, HashAlgorithm.identity, (ecmp_index_t)0, meta.flow_key, SIZE);

    // Spread flows over the group's `size` members by a seeded hash of the 5-tuple (plus the PSN for a DLCP
    // job that sprays its packets).
    action set_ecmp_group(ecmp_group_t group, bit<16> size, bit<32> multiplier) {
        meta.ecmp_group = group;
        ECMP_CRC()
        ECMP_MEMBER(size, multiplier)
        meta.flow_key.setInvalid();
    }

    // LetFlow: a flow keeps its member while its packets come closer together than `gap_us`; the first packet
    // after a longer idle gap starts a new flowlet on a member drawn at random. The slot's read, decision and
    // write are this one action (BMv2 runs an action atomically). A DLCP job that sprays is hashed per packet
    // as in set_ecmp_group and leaves the flowlet state alone.
    action set_flowlet_group(ecmp_group_t group, bit<16> size, bit<32> multiplier, bit<32> gap_us) {
        meta.ecmp_group = group;
        ECMP_CRC()
        meta.flow_key.slot = (bit<32>)meta.ecmp_index & (FLOWLET_SLOTS - 1);  // the 5-tuple's CRC-16, its low bits
        ECMP_MEMBER(size, multiplier)
        meta.flow_key.sprayed = (meta.dlcp.features & DLCP_F_SPRAY) != 0 ? 1w1 : 1w0;
        flowlet_time.read(meta.flow_key.last, meta.flow_key.slot);
        flowlet_member.read(meta.flow_key.member, meta.flow_key.slot);
        random(meta.flow_key.draw, 16w0, 16w0xFFFF);
        meta.flow_key.fresh = (bit<32>)std_meta.ingress_global_timestamp - meta.flow_key.last > gap_us
            || meta.flow_key.member >= size ? 1w1 : 1w0;
        meta.flow_key.member = meta.flow_key.fresh == 1 && meta.flow_key.sprayed == 0
            ? (bit<16>)(((bit<32>)meta.flow_key.draw * (bit<32>)size) >> 16) : meta.flow_key.member;
        meta.flow_key.last = meta.flow_key.sprayed == 1 ? meta.flow_key.last
            : (bit<32>)std_meta.ingress_global_timestamp;
        flowlet_member.write(meta.flow_key.slot, meta.flow_key.member);
        flowlet_time.write(meta.flow_key.slot, meta.flow_key.last);
        meta.ecmp_index = meta.flow_key.sprayed == 1 ? meta.ecmp_index : meta.flow_key.member;
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
            set_flowlet_group;
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
                set_flowlet_group: {
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
