/*
 * ROCE_ICRC: the ICRC of a RoCE v2 aggregation packet, as it must appear on the wire.
 *
 * One definition for both directions. NetReduceIngress compares it with the ICRC a packet
 * arrived with (a corrupted contribution, partial or result is dropped before it touches any
 * register), and computes the ICRC of a result (or partial) once, for a "canonical" connection
 * whose addresses, UDP source port and destination QP are zero. NetReduceEgress then makes each
 * copy's ICRC from that one without hashing the packet again: the ICRC is affine in the
 * packet's bits, so for packets of equal length ICRC(copy) = ICRC(canonical) ^ delta, where
 * delta depends only on the connection's four fields and the packet's length (its kind),
 * and the controller installs it with the connection (roce.wire.icrc_connection_delta).
 *
 * CRC-32 over the invariant fields (RoCE v2 annex A17.3.3; roce/wire.py computes the same): 8
 * bytes of ones standing for the LRH, the IPv4 header with TOS, TTL and checksum replaced by
 * ones, the UDP header with its checksum replaced by ones, the BTH with FECN, BECN and the 6
 * reserved bits replaced by ones, the extension header (RETH or ImmDt), the payload. The ICRC
 * goes on the wire least significant byte first, so the hash's bytes are reversed.
 */
#ifndef _GRADSWITCH_ICRC_P4_
#define _GRADSWITCH_ICRC_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"

// The invariant fields of IPv4 / UDP / BTH that start the ICRC.
#define ICRC_PREFIX(SRC_ADDR, DST_ADDR, SRC_PORT, DEST_QP) \
    64w0xFFFFFFFFFFFFFFFF \
    ++ hdr.ipv4.version ++ hdr.ipv4.ihl ++ 8w0xFF ++ hdr.ipv4.total_len ++ hdr.ipv4.identification \
    ++ hdr.ipv4.flags ++ hdr.ipv4.frag_offset ++ 8w0xFF ++ hdr.ipv4.protocol ++ 16w0xFFFF \
    ++ SRC_ADDR ++ DST_ADDR \
    ++ SRC_PORT ++ hdr.udp.dst_port ++ hdr.udp.length ++ 16w0xFFFF \
    ++ hdr.bth.opcode ++ hdr.bth.se ++ hdr.bth.mig_req ++ hdr.bth.pad_count ++ hdr.bth.tver ++ hdr.bth.pkey \
    ++ 8w0xFF ++ DEST_QP ++ hdr.bth.ack_req ++ hdr.bth.resv7 ++ hdr.bth.psn

// (One concatenated element, not a list of fields: p4c copies every element of a hash's field
// list into a temporary first, and BMv2 pays for every copy.)
#define ICRC_PAYLOAD_WORD(q) hdr.agg.w##q

// WIRE_ICRC = the ICRC trailer the packet would carry (hdr.icrc.value's layout) with the given
// source and destination addresses, UDP source port and destination QP (the packet's own to check
// it). A statement for the apply block of a control with `hdr` (a macro, not a control: applying a
// control copies the whole headers struct in, four wide payload fields included, on every packet).
// Aggregation packets only (hdr.agg valid): WRITE First (RETH), Middle, Last with Immediate (ImmDt).
#define ROCE_ICRC(WIRE_ICRC, SRC_ADDR, DST_ADDR, SRC_PORT, DEST_QP) { \
    bit<32> icrc_crc; \
    if (hdr.reth.isValid()) { \
        hash(icrc_crc, HashAlgorithm.crc32, 32w0, \
             { ICRC_PREFIX(SRC_ADDR, DST_ADDR, SRC_PORT, DEST_QP), \
               hdr.reth.virtual_addr ++ hdr.reth.rkey ++ hdr.reth.dma_length, AGG_WORD_LIST(ICRC_PAYLOAD_WORD) }, \
             33w0x100000000); \
    } else if (hdr.immdt.isValid()) { \
        hash(icrc_crc, HashAlgorithm.crc32, 32w0, \
             { ICRC_PREFIX(SRC_ADDR, DST_ADDR, SRC_PORT, DEST_QP), hdr.immdt.data, AGG_WORD_LIST(ICRC_PAYLOAD_WORD) }, \
             33w0x100000000); \
    } else { \
        hash(icrc_crc, HashAlgorithm.crc32, 32w0, \
             { ICRC_PREFIX(SRC_ADDR, DST_ADDR, SRC_PORT, DEST_QP), AGG_WORD_LIST(ICRC_PAYLOAD_WORD) }, \
             33w0x100000000); \
    } \
    WIRE_ICRC = icrc_crc[7:0] ++ icrc_crc[15:8] ++ icrc_crc[23:16] ++ icrc_crc[31:24]; \
}

#endif
