/*
 * The ICRC of a RoCE v2 aggregation packet, as it must appear on the wire (ICRC_COVER, ICRC_OF_HEADERS, ICRC_UNCOVER).
 *
 * One definition for both directions. NetReduceIngress compares it with the ICRC a packet
 * arrived with (a corrupted contribution, partial or result is dropped before it touches any
 * register), and computes the ICRC of a result (or partial) once, for a "canonical" connection
 * whose addresses, UDP source port and destination QP are zero. NetReduceEgress then makes each
 * copy's ICRC from that one without hashing the packet again: the ICRC is affine in the
 * packet's bits, so for packets of equal length ICRC(copy) = ICRC(canonical) ^ delta, where
 * delta depends only on the connection's four fields and the packet's length (its kind),
 * and the controller installs it with the connection (gradswitch.roce.wire.icrc_connection_delta).
 *
 * CRC-32 over the invariant fields (RoCE v2 annex A17.3.3; gradswitch/roce/wire.py computes the same): 8
 * bytes of ones standing for the LRH, the IPv4 header with TOS, TTL and checksum replaced by
 * ones, the UDP header with its checksum replaced by ones, the BTH with FECN, BECN and the 6
 * reserved bits replaced by ones, the extension header (RETH or ImmDt), the payload. The ICRC
 * goes on the wire least significant byte first, so the hash's bytes are reversed.
 *
 * The hash's input is the headers struct itself: BMv2 serializes its valid headers in order, and
 * p4c passes them as they are. (A list of fields or of headers is copied into temporaries first,
 * every payload word included; those temporaries were a fifth of what a contribution cost BMv2, and
 * each is metadata BMv2 zeroes for every packet.) So the packet's own headers are made what the
 * ICRC covers: the variant fields set to ones, Ethernet and the ICRC trailer taken out, the LRH's
 * ones put in (headers.p4 orders icrc_lrh right before IPv4). Only packets NetReduce consumes
 * go through this: a contribution is dropped or becomes a result, whose egress rewrite sets every
 * variant field again (controls/netreduce.p4).
 */
#ifndef _GRADSWITCH_ICRC_P4_
#define _GRADSWITCH_ICRC_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"

// Statements for an action of a control with `hdr`: the packet's valid headers become exactly what
// the ICRC covers (aggregation packets: IPv4, UDP, BTH, RETH or ImmDt, payload).
#define ICRC_COVER() \
    hdr.ipv4.dscp = 0x3F; \
    hdr.ipv4.ecn = 3; \
    hdr.ipv4.ttl = 0xFF; \
    hdr.ipv4.hdr_checksum = 0xFFFF; \
    hdr.udp.checksum = 0xFFFF; \
    hdr.bth.fecn_becn = 0xFF; \
    hdr.ethernet.setInvalid(); \
    hdr.icrc.setInvalid(); \
    hdr.icrc_lrh.setValid(); \
    hdr.icrc_lrh.ones = 0xFFFFFFFFFFFFFFFF;

// ... and back: Ethernet and the trailer valid again (their fields zero until egress rewrites them).
#define ICRC_UNCOVER() \
    hdr.icrc_lrh.setInvalid(); \
    hdr.ethernet.setValid(); \
    hdr.icrc.setValid();

// WIRE (a bit<32> field) = the ICRC of the covered headers, as the trailer carries it (hdr.icrc.value's
// byte order). Hashed into WIRE itself and its bytes reversed in place: a local would be a metadata field.
#define ICRC_OF_HEADERS(WIRE) \
    hash(WIRE, HashAlgorithm.crc32, 32w0, hdr, 33w0x100000000); \
    WIRE = WIRE[7:0] ++ WIRE[15:8] ++ WIRE[23:16] ++ WIRE[31:24];

#endif
