/*
 * Payload trimming (NDP's packet trimming): a RoCE packet leaves as its headers alone, marked trimmed in
 * BTH.resv7, with the lengths and a fresh ICRC of what is left. One definition for DLCP's selective drop
 * (controls/dlcp.p4: a drop notification) and NetReduce's reduce-scatter (controls/netreduce_scatter.p4: the
 * copy for a receiver that does not own the message's shard). Receivers apply a trimmed packet as zeros within
 * their loss budget (gradswitch/roce/qp.py Responder), so its PSN counts and its sender is acknowledged end to end.
 */
#ifndef _GRADSWITCH_TRIM_P4_
#define _GRADSWITCH_TRIM_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "icrc.p4"

// What a trimmed packet keeps: Ethernet, IPv4, UDP, BTH, the RETH or ImmDt it has, and a fresh ICRC.
#define TRIM_UDP_LENGTH (8 + 12 + 4)
#define TRIM_IPV4_LENGTH (20 + TRIM_UDP_LENGTH)
#define TRIM_FRAME_BYTES (14 + TRIM_IPV4_LENGTH)
#define TRIM_RETH 16
#define TRIM_IMMDT 4

// `notification`: a drop notification (DLCP) goes first out, in CS DLCP_ACK_PRIORITY; a NetReduce copy keeps its
// DSCP, its connection's (an RC connection's packets leave in order: a trimmed copy in a higher class than the
// whole ones queued before it would overtake them, and its receiver would take the copies that follow it as
// lost). A constructor parameter, so each instance is compiled with its own (an argument would cost a temporary
// field in every packet's metadata: tests/unit/test_metadata_budget.py).
control TrimPayload(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std_meta)(bool notification) {

    // The payload goes, the headers go on. IPv4 and UDP lengths are the trimmed packet's, BTH.pad_count 0, the
    // TRIMMED bit set in resv7 (the droppable bit stays), a notification's DSCP CS DLCP_ACK_PRIORITY (a copy's kept,
    // as ECN, TTL and FECN/BECN are: computing the ICRC overwrites them); a fresh ICRC
    // covers exactly those headers and is emitted after them (hdr.icrc), and truncate() cuts what follows it: the
    // payload and the old ICRC. The ICRC is computed by making the packet's headers what it covers
    // (controls/icrc.p4): Ethernet and the variant fields it overwrites are kept in meta.dlcp_state meanwhile and
    // put back. (One action: a table's const entries give it the lengths of each shape, so that no length is
    // computed, which p4c would make a temporary.)
    action trim(bit<16> ipv4_length, bit<16> udp_length, bit<32> frame_bytes) {
        meta.dlcp_state.setValid();
        meta.dlcp_state.eth_dst = hdr.ethernet.dst_addr;
        meta.dlcp_state.eth_src = hdr.ethernet.src_addr;
        meta.dlcp_state.ttl = hdr.ipv4.ttl;
        meta.dlcp_state.ecn = hdr.ipv4.ecn;
        meta.dlcp_state.dscp = hdr.ipv4.dscp;
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
        if (notification) {
            hdr.ipv4.dscp = DLCP_ACK_PRIORITY << 3;
        } else {
            hdr.ipv4.dscp = meta.dlcp_state.dscp;
        }
        hdr.ipv4.ecn = meta.dlcp_state.ecn;
        hdr.ipv4.ttl = meta.dlcp_state.ttl;
        hdr.udp.checksum = 0;  // (none: RoCE v2 senders send 0, and a checksum of the old payload would be wrong)
        hdr.bth.fecn_becn = meta.dlcp_state.fecn_becn;
        truncate(frame_bytes);
        meta.dlcp_state.setInvalid();
    }

    // The trimmed lengths of each shape of packet: with or without a RETH (WRITE First and Only), an ImmDt (*_IMM).
    table trim_shapes {
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

    apply {
        trim_shapes.apply();
    }
}

#endif
