/*
 * gradswitch parser, checksum controls and deparser.
 *
 * A packet the parser cannot take (truncated, IPv4 options, ...) reaches
 * ingress with standard_metadata.parser_error set; ingress drops it and counts it
 * as DROP_MALFORMED without touching any other state.
 */
#ifndef _GRADSWITCH_PARSER_P4_
#define _GRADSWITCH_PARSER_P4_

#include <core.p4>
#include <v1model.p4>

#include "headers.p4"

// UDP length of aggregation packets: UDP 8 + BTH 12 (+ RETH 16 | ImmDt 4) + payload + ICRC 4.
#define AGG_PAYLOAD_BYTES (AGG_ELEMENTS_PER_PACKET * 4)
#define AGG_UDP_LENGTH_MIDDLE (8 + 12 + AGG_PAYLOAD_BYTES + 4)
#define AGG_UDP_LENGTH_FIRST (8 + 12 + 16 + AGG_PAYLOAD_BYTES + 4)
#define AGG_UDP_LENGTH_LAST_IMM (8 + 12 + 4 + AGG_PAYLOAD_BYTES + 4)
// ... and of their headers alone (an all-gather's placeholder contribution, or a trimmed packet: no payload).
#define AGG_UDP_LENGTH_BARE_MIDDLE (8 + 12 + 4)
#define AGG_UDP_LENGTH_BARE_FIRST (8 + 12 + 16 + 4)
#define AGG_UDP_LENGTH_BARE_LAST_IMM (8 + 12 + 4 + 4)

error {
    IPv4NotSupported  // not version 4, or with options
}

parser GradswitchParser(packet_in packet,
                        out headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t std_meta) {
    state start {
        meta.ingress_port = (bit<32>)std_meta.ingress_port;
        transition select(std_meta.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        // Version 4 without options only (anything else sets parser_error, and ingress drops it as
        // malformed). L4 is parsed only for first fragments; later fragments are routed on their IPv4
        // header alone. (One select, not verify() calls: p4c makes each verify's condition a
        // temporary, a metadata field BMv2 zeroes for every packet.)
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_TCP): parse_tcp;
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            (4, 5, _, _): accept;
            default: unsupported_ipv4;
        }
    }

    state unsupported_ipv4 {
        verify(false, error.IPv4NotSupported);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            ROCE_V2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            ROCE_WRITE_FIRST: parse_reth;
            ROCE_WRITE_ONLY: parse_reth;
            ROCE_WRITE_ONLY_IMM: parse_reth;
            ROCE_READ_REQUEST: parse_reth;
            ROCE_SEND_LAST_IMM: parse_immdt;
            ROCE_SEND_ONLY_IMM: parse_immdt;
            ROCE_WRITE_LAST_IMM: parse_immdt;
            ROCE_WRITE_MIDDLE: check_agg_middle;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition select(hdr.bth.opcode, hdr.udp.length) {
            (ROCE_WRITE_ONLY_IMM, _): parse_immdt;
            (ROCE_WRITE_FIRST, AGG_UDP_LENGTH_FIRST): parse_agg;
            (ROCE_WRITE_FIRST, AGG_UDP_LENGTH_BARE_FIRST): parse_icrc;
            default: accept;
        }
    }

    state parse_immdt {
        packet.extract(hdr.immdt);
        transition select(hdr.bth.opcode, hdr.udp.length) {
            (ROCE_WRITE_LAST_IMM, AGG_UDP_LENGTH_LAST_IMM): parse_agg;
            (ROCE_WRITE_LAST_IMM, AGG_UDP_LENGTH_BARE_LAST_IMM): parse_icrc;
            default: accept;
        }
    }

    // RoCE packets are parsed to the payload only when their length is exactly an aggregation
    // packet's (other RoCE traffic is forwarded on its headers alone).
    state check_agg_middle {
        transition select(hdr.udp.length) {
            AGG_UDP_LENGTH_MIDDLE: parse_agg;
            AGG_UDP_LENGTH_BARE_MIDDLE: parse_icrc;
            default: accept;
        }
    }

    state parse_agg {
        packet.extract(hdr.agg);
        packet.extract(hdr.icrc);
        transition accept;
    }

    // The headers of an aggregation packet alone: its ICRC follows them (NetReduce checks it).
    state parse_icrc {
        packet.extract(hdr.icrc);
        transition accept;
    }
}

control GradswitchVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GradswitchComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GradswitchDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.reth);
        packet.emit(hdr.immdt);
        packet.emit(hdr.agg);
        packet.emit(hdr.icrc);
    }
}

#endif
