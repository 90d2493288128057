/*
 * gradswitch headers and metadata.
 */
#ifndef _GRADSWITCH_HEADERS_P4_
#define _GRADSWITCH_HEADERS_P4_

#include "config.p4"
#include "types.p4"
#include "agg_payload.p4"

/* ---- controller headers (packet-in / packet-out through CPU_PORT) ---- */

// Prepended by the switch to every packet it sends to the controller.
@controller_header("packet_in")
header packet_in_h {
    port_t  ingress_port;  // port the packet arrived on
    bit<7>  _pad;
    bit<8>  reason;        // PUNT_* in config.p4
}

// Prepended by the controller to every packet it injects.
@controller_header("packet_out")
header packet_out_h {
    port_t  egress_port;   // port the packet leaves from, as is
    bit<7>  _pad;
}

/* ---- L2 / L3 / L4 ---- */

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// ARP for IPv4 over Ethernet (htype 1, ptype 0x0800, hlen 6, plen 4).
header arp_h {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     op;
    mac_addr_t  sender_mac;
    ipv4_addr_t sender_ip;
    mac_addr_t  target_mac;
    ipv4_addr_t target_ip;
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// The fixed 20 bytes of TCP; options, if any, stay in the payload.
header tcp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* ---- RoCE v2 (InfiniBand transport over UDP port ROCE_V2_UDP_PORT) ---- */

// Base Transport Header, 12 bytes.
header bth_h {
    bit<8>  opcode;      // ROCE_* in types.p4
    bit<1>  se;          // solicited event
    bit<1>  mig_req;     // migration state
    bit<2>  pad_count;   // bytes of padding before the ICRC
    bit<4>  tver;        // transport header version (0)
    bit<16> pkey;        // partition key
    bit<8>  fecn_becn;   // FECN (bit 7), BECN (bit 6) and 6 reserved bits: all masked in the ICRC
    qpn_t   dest_qp;     // destination queue pair
    bit<1>  ack_req;     // responder should acknowledge
    bit<7>  resv7;
    psn_t   psn;         // packet sequence number
}

// RDMA Extended Transport Header, 16 bytes: on WRITE First/Only and READ Request.
header reth_h {
    bit<64> virtual_addr;
    bit<32> rkey;
    bit<32> dma_length;
}

// ACK Extended Transport Header, 4 bytes: on ACK/NAK and READ responses.
header aeth_h {
    bit<8>  syndrome;    // 0x00-0x1f ACK (credit count), 0x60-0x7f NAK (code)
    bit<24> msn;         // message sequence number
}

// Immediate data, 4 bytes: on *_IMM opcodes.
header immdt_h {
    bit<32> data;
}

// Invariant CRC trailer of a RoCE packet (least significant byte first on the wire).
header icrc_h {
    bit<32> value;
}

// What the ICRC puts before the IPv4 header on RoCE v2: 8 bytes of ones for the InfiniBand LRH
// (controls/icrc.p4). Never parsed nor emitted: valid only while the switch computes an ICRC.
header icrc_lrh_h {
    bit<64> ones;
}

struct headers_t {
    packet_out_h packet_out;
    packet_in_h  packet_in;
    ethernet_h   ethernet;
    arp_h        arp;
    icrc_lrh_h   icrc_lrh;     // (the ICRC hashes the valid headers from here to agg: controls/icrc.p4)
    ipv4_h       ipv4;
    tcp_h        tcp;
    udp_h        udp;
    bth_h        bth;
    reth_h       reth;
    aeth_h       aeth;
    immdt_h      immdt;
    agg_payload_h agg;
    icrc_h       icrc;
}

/* ---- per-packet metadata ---- */

// Field list that survives an ingress-to-egress clone (copy_to_cpu).
#define CPU_CLONE_FIELD_LIST 1

// NetReduce state of one packet (controls/netreduce.p4).
struct netreduce_metadata_t {
    bit<8>  job;          // job the packet belongs to (member table, or the job it claims)
    bool    claims;       // the packet names a job (by its RETH rkey or its connection)
    bit<8>  member_bit;   // bit of the sender in the job's contribution bitmap
    bit<16> member_id;    // index of the member QP in nr_qp_context
    bit<8>  peer_index;   // worker index of a contributor's connection, or a child's index (resend group)
    bit<8>  kind;         // NR_MEMBER_CONTRIBUTOR or NR_MEMBER_PARENT
    bit<32> base_cell;    // first cell of the job's region
    bit<8>  credits;      // the job's credits C (its window holds 2C messages)
    bit<8>  members;      // contributions that complete a cell on this switch
    bit<8>  role;         // NR_ROLE_*
    bit<16> group_base;   // the job's first multicast group
    bit<32> msg;          // message number: PSN >> AGG_PACKETS_PER_MESSAGE_LOG2
    bit<8>  window;       // the message's place in the job's window (0 .. 2C-1)
    bool    context_ok;   // the message's window index is known
    bit<32> cell;         // aggregator cell of this packet
    bit<32> other_cell;   // the same packet position in the slot's other shadow copy
    bit<8>  outcome;      // a contribution's verdict (NR_V_* bits), or a parent's result's NR_OUT_*
    bool    consumed;     // NetReduce took the packet (not forwarded as is)
    bool    emit;         // egress must rewrite the copy into a connection and recompute the ICRC
    bool    icrc_ok;      // the packet's ICRC is right (checked before anything of it is used)
    bit<32> icrc;         // an emitted packet's ICRC on the canonical connection (controls/icrc.p4, wire order)
}

// DLCP state of one packet (controls/dlcp.p4).
struct dlcp_metadata_t {
    bit<8>  job;          // job of a RoCE packet: destination QP bits 23..16
    bit<1>  priority_on;  // the job's features, from dlcp_jobs
    bit<1>  drop_on;
    bit<1>  spray_on;
    bit<3>  priority;     // queue chosen for the packet (0 unless classified)
    bool    classified;   // egress writes the priority into the DSCP
    bool    droppable;    // marked droppable by the sender and the job allows dropping
    bit<32> spray_key;    // extra ECMP hash input: the PSN when spraying, else 0
    bit<32> port_rate;    // egress port's virtual-queue drain rate, bytes per 1024 us
    bit<32> threshold;    // drop threshold (bytes) of the packet's priority
    bit<32> queue;        // virtual queue of the packet's class on its egress port when it arrived (bytes)
    bool    drop_now;     // at or over the threshold: drop
}

struct local_metadata_t {
    bit<16>      l4_src_port;   // TCP/UDP source port, 0 otherwise (ECMP hash input)
    bit<16>      l4_dst_port;   // TCP/UDP destination port, 0 otherwise (ECMP hash input)
    ecmp_group_t ecmp_group;    // ECMP group chosen by the IPv4 route (0: none)
    ecmp_index_t ecmp_index;    // member of ecmp_group chosen by the flow hash
    bool         routed;        // forwarded at L3: egress rewrites the source MAC
    bool         dropped;       // a control dropped the packet (counted once, by reason)
    bit<8>       drop_reason;   // DROP_* in config.p4, valid when dropped
    bit<32>      fault_ppm;     // drop probability chosen by a fault-injection rule (parts of FAULT_SCALE)
    bit<32>      fault_draw;    // uniform random draw in [0, FAULT_SCALE) compared with fault_ppm
    bool         fault_corrupt; // the rule corrupts (flips a bit) instead of dropping
    @field_list(CPU_CLONE_FIELD_LIST)
    bit<8>       punt_reason;   // PUNT_* when the packet goes to the CPU port
    @field_list(CPU_CLONE_FIELD_LIST)
    port_t       ingress_port;  // copy of the ingress port that clones keep
    netreduce_metadata_t nr;    // in-network aggregation (docs/netreduce.md)
    dlcp_metadata_t dlcp;       // priority, dropping, spraying (docs/dlcp.md)
}

#endif
