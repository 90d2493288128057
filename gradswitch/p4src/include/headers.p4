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
    immdt_h      immdt;
    agg_payload_h agg;
    icrc_h       icrc;
}

/* ---- per-packet metadata ---- */

// Field list that survives an ingress-to-egress clone (copy_to_cpu).
#define CPU_CLONE_FIELD_LIST 1

// What NetReduce decided about a packet, for the rest of the pipeline (controls/netreduce.p4).
struct netreduce_metadata_t {
    bool    consumed;     // NetReduce took the packet (not forwarded as is)
    bool    emit;         // egress must rewrite the copy into a connection and give it its ICRC
    bit<8>  job;          // the job of an emitted copy (nr_connections)
    bit<32> icrc;         // an emitted copy's ICRC on the canonical connection (controls/icrc.p4, wire order)
}

// What egress needs of an emitted NetReduce copy besides meta.nr (controls/netreduce_scatter.p4): a header kept
// in the metadata, made valid by the action that emits, so that other packets do not pay for its fields
// (netreduce_state_h says more).
header netreduce_copy_h {
    bit<8>  owner;        // the message's owner field (0 all-reduce, r + 1: rank r's shard), bit 7: an all-gather job
    bit<8>  receiver;     // the rank that receives the copy egress rewrote (NR_RECEIVER_SWITCH: a switch)
}

// NetReduce's working state while NetReduceIngress handles a packet: a header kept in the metadata,
// made valid for a member's packet or one that claims a job (which zeroes it), invalid again when
// NetReduceIngress is done. BMv2 zeroes every metadata field of every packet it receives, field by field in its one
// receiving thread, whatever the packet; a header's fields only when the header is made valid. So a
// plain packet does not pay for these fields, and a packet NetReduce handles pays once, in ingress.
// The fields an action only reads back within itself (state, twin, entry, word) are shared by every
// action: an action's local is a field of its own. The event indices are set by the actions that
// decide and counted by one action at the end (tally): an extern call's computed argument would be a
// temporary of its own at every call site, a metadata field of its own each.
header netreduce_state_h {
    bit<8>  job;          // job the packet belongs to (member table, or the job it claims)
    bit<8>  member_bit;   // bit of the sender in the job's contribution bitmap
    bit<8>  peer_index;   // worker index of a contributor's connection, or a child's index (resend group)
    bit<8>  kind;         // NR_MEMBER_CONTRIBUTOR or NR_MEMBER_PARENT
    bit<32> base_cell;    // first cell of the job's region
    bit<8>  credits;      // the job's credits C (its window holds 2C messages)
    bit<8>  members;      // contributions that complete a cell on this switch
    bit<8>  quorum;       // k of N: contributions that complete it (members: N of N, as every job but a k-of-N one)
    bit<8>  partial;      // 1: a job whose sums may leave members out (k below N, or a deadline): judge_late runs
    bit<32> deadline;     // k of N: a cell's sum leaves with fewer than quorum members this long after its first
                          // contribution, in microseconds of ingress_global_timestamp (0: never)
    bit<32> started;      // the cell's first contribution's time (nr_cell_started; judge_late)
    bit<8>  expired;      // 1: the packet closes its cell (judge_late: the deadline passed, or the message's first
                          // cell closed with exactly the members this one holds after it)
    bit<8>  role;         // NR_ROLE_*
    bit<16> group_base;   // the job's first multicast group
    bit<8>  owners;       // owner fields a RETH may carry: 1 (all-reduce only: 0), or N + 1 (reduce-scatter too)
    bit<8>  owner;        // the message's owner field (NR_OWNER_VA_SHIFT; from the RETH, or the per-QP context)
    bit<8>  gather;       // 1: an all-gather job (placeholder contributions are zeros; the owner's copy is trimmed)
    bit<8>  filled;       // 1: the packet is a placeholder, filled with zeros (it may neither complete nor answer)
    bit<32> msg;          // message number: PSN >> AGG_PACKETS_PER_MESSAGE_LOG2
    bit<32> context;      // the message's entry in nr_qp_context (member QP, message mod AGG_MAX_CREDITS)
    bit<8>  window;       // the message's place in the job's window (0 .. 2C-1)
    bit<32> cell;         // aggregator cell of this packet
    bit<32> other_cell;   // the same packet position in the slot's other shadow copy
    bit<16> outcome;      // a contribution's verdict (NR_V_* bits), or a parent's result's NR_OUT_*
    bool    context_ok;   // the message's window index is known
    bool    icrc_ok;      // the packet's ICRC is right (checked before anything of it is used)
    bit<6>  _pad;
    bit<32> icrc;         // the ICRC the packet came with (wire order)
    bit<64> state;        // a cell's state (nr_cells), read and written back by one action
    bit<64> twin;         // the state of the cell's other shadow copy
    bit<64> head;         // the state of the cell of the message's first packet (k of N: who is in the message)
    bit<8>  late;         // 1: k of N, the contribution came after its message's sum left without it (judge_late)
    bit<32> entry;        // a per-QP context entry (nr_qp_context), or a computed ICRC
    bit<AGG_WORD_BITS> word;  // one word of a cell's values (nr_values<q>)
    bit<32> job_events;   // nr_job_events index of the job's first event (job * NR_EVENTS)
    bit<32> port_events;  // nr_port_events index of the ingress port's first event
    // The cells of nr_job_events and nr_port_events tally counts: up to NR_TALLY events a packet; an
    // unused one stays 0, the cell of job 0 and port 0, neither of which exists.
    bit<32> job_event0;
    bit<32> port_event0;
    bit<32> job_event1;
    bit<32> port_event1;
    bit<32> job_event2;
    bit<32> port_event2;
}

// DLCP state of one packet (controls/dlcp.p4).
struct dlcp_metadata_t {
    bit<8>  job;          // job of a RoCE packet: destination QP bits 23..16
    bit<8>  features;     // the job's features, from dlcp_jobs: DLCP_F_* bits
    bit<3>  priority;     // queue chosen for the packet (0 unless classified)
    bool    classified;   // egress writes the priority into the DSCP
    bool    droppable;    // marked droppable by the sender and the job allows dropping
    bool    drop_now;     // at or over its virtual queue's threshold: drop
    bit<32> spray_key;    // extra ECMP hash input: the PSN when spraying, else 0
}

// DLCP egress's working state (controls/dlcp.p4): a header kept in the metadata, valid only while DlcpEgress
// updates a watched port's virtual queue, or trims a packet, so that other packets' metadata does not carry
// (and BMv2 does not zero, for every packet) these fields (netreduce_state_h says more).
header dlcp_state_h {
    bit<32> port_rate;    // egress port's virtual-queue drain rate, bytes per 1024 us
    bit<32> vq;           // the packet's virtual queue (dlcp_vq_*): egress port and priority
    bit<32> threshold;    // drop threshold (bytes) of the packet's priority
    bit<32> queue;        // that virtual queue's bytes: when the packet arrived, then with it if kept
    bit<48> last;         // when that virtual queue was last updated (us)
    // Trimming: what computing the ICRC overwrites (controls/icrc.p4), put back after it, and the ICRC.
    mac_addr_t eth_dst;
    mac_addr_t eth_src;
    bit<8>  ttl;
    bit<8>  fecn_becn;
    bit<2>  ecn;
    bit<6>  dscp;
    bit<32> icrc;         // the trimmed packet's ICRC (wire order)
}

// What an ECMP group hashes, and flowlet switching's working state (controls/l3_forwarding.p4): a header kept in
// the metadata, valid only inside set_ecmp_group / set_flowlet_group. A list of fields given to hash() is copied
// into temporaries first, metadata fields BMv2 zeroes for every packet whether it is hashed or not; a header is
// hashed as it is. The working fields come first: they are zero while the 5-tuple's CRC-16 is computed, and
// CRC-16/ARC (initial value 0) is not changed by leading zero bytes, so the hash is the 5-tuple's own.
header flow_key_h {
    bit<64>     mixed;       // the 5-tuple's CRC-16 mixed with the route's seed (first: HashAlgorithm.identity
                             // reads a header's first 8 bytes, and gives them mod the group's size: the member)
    bit<32>     slot;        // flowlet: the flow's slot in flowlet_time / flowlet_member
    bit<32>     last;        // flowlet: when the slot last saw a packet (us, low 32 bits of the timestamp)
    bit<16>     member;      // flowlet: the slot's member (index in the ECMP group)
    bit<16>     draw;        // flowlet: a uniform random 16-bit number, a new flowlet's member scaled to the size
    bit<1>      fresh;       // flowlet: the slot was idle for more than the gap (or holds another group's member)
    bit<1>      sprayed;     // a DLCP job that sprays its packets: the per-packet hash decides, not the flowlet
    bit<6>      _pad;        // (bits, not bool: a hashed header's bool would be an expression BMv2 cannot hash)
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    bit<8>      protocol;
    bit<16>     l4_src_port;
    bit<16>     l4_dst_port;
    bit<32>     spray_key;   // the PSN of a DLCP job's packet when it sprays, else 0
}

// A fault-injection rule that matched the packet (controls/fault_injection.p4): a header kept in the
// metadata, valid from the rule's match to the draw that decides, for the same reason.
header fault_h {
    bit<32> ppm;          // drop (or corrupt) probability, parts of FAULT_SCALE
    bit<32> draw;         // uniform random draw in [0, FAULT_SCALE) compared with ppm
    bool    corrupt;      // the rule flips a bit instead of dropping
    bit<7>  _pad;
}

struct local_metadata_t {
    bit<16>      l4_src_port;   // TCP/UDP source port, 0 otherwise (ECMP hash input)
    bit<16>      l4_dst_port;   // TCP/UDP destination port, 0 otherwise (ECMP hash input)
    ecmp_group_t ecmp_group;    // ECMP group chosen by the IPv4 route (0: none)
    ecmp_index_t ecmp_index;    // member of ecmp_group chosen by the flow hash
    flow_key_h   flow_key;      // ... of this, valid only while it is hashed
    bool         routed;        // forwarded at L3: egress rewrites the source MAC
    bool         dropped;       // a control dropped the packet (counted once, by reason)
    bit<32>      drop_reason;   // DROP_* in config.p4, valid when dropped (32 bits: the drops counter's index)
    fault_h      fault;         // a fault-injection rule that matched, valid until its draw
    @field_list(CPU_CLONE_FIELD_LIST)
    bit<8>       punt_reason;   // PUNT_* when the packet goes to the CPU port
    @field_list(CPU_CLONE_FIELD_LIST)
    bit<32>      ingress_port;  // copy of the ingress port that clones keep (32 bits: port_rx's index)
    netreduce_metadata_t nr;    // in-network aggregation (docs/netreduce.md): what it decided
    netreduce_copy_h nr_copy;   // ... and for an emitted copy, whose message it is and who receives it
    netreduce_state_h nr_state; // ... and its working state, valid only inside NetReduceIngress
    dlcp_metadata_t dlcp;       // priority, dropping, spraying (docs/dlcp.md)
    dlcp_state_h dlcp_state;    // ... and DlcpEgress's working state, valid only while it updates a queue or trims
}

#endif
