/*
 * gradswitch configuration: every size and shared constant of the switch program.
 *
 * This file is the single source of these values. The Python side
 * (gradswitch/protocol/config.py) parses the `#define NAME VALUE` lines below, so a
 * constant must stay a plain decimal or hexadecimal number on one line, with
 * its comment on the line(s) just above it. tests/unit/test_constants.py fails
 * when Python and the compiled program disagree.
 */
#ifndef _GRADSWITCH_CONFIG_P4_
#define _GRADSWITCH_CONFIG_P4_

/* ---- ports ---- */

// Port through which the controller sends packet-outs and receives packet-ins (simple_switch --cpu-port).
#define CPU_PORT 255
// Number of port indices the per-port counters and port tables cover (ports 0..255, CPU port included).
#define MAX_PORTS 256
// Strict-priority queues per egress port (simple_switch_grpc -- --priority-queues); priority 7 is served first.
#define PRIORITY_QUEUES 8

/* ---- protocol numbers (fixed by the standards; gradswitch/roce/headers.py and the controller read them here) ---- */

// EtherType of ARP.
#define ETHERTYPE_ARP 0x0806
// EtherType of IPv4.
#define ETHERTYPE_IPV4 0x0800
// IPv4 protocol number of TCP.
#define IP_PROTO_TCP 6
// IPv4 protocol number of UDP.
#define IP_PROTO_UDP 17
// ARP operation: request.
#define ARP_OP_REQUEST 1
// ARP operation: reply.
#define ARP_OP_REPLY 2
// UDP destination port of RoCE v2 (IANA).
#define ROCE_V2_UDP_PORT 4791
// InfiniBand BTH opcode (Reliable Connection, IBTA vol. 1, 9.2): SEND First.
#define ROCE_SEND_FIRST 0x00
// BTH opcode: SEND Middle.
#define ROCE_SEND_MIDDLE 0x01
// BTH opcode: SEND Last.
#define ROCE_SEND_LAST 0x02
// BTH opcode: SEND Last with Immediate.
#define ROCE_SEND_LAST_IMM 0x03
// BTH opcode: SEND Only.
#define ROCE_SEND_ONLY 0x04
// BTH opcode: SEND Only with Immediate.
#define ROCE_SEND_ONLY_IMM 0x05
// BTH opcode: RDMA WRITE First (carries a RETH).
#define ROCE_WRITE_FIRST 0x06
// BTH opcode: RDMA WRITE Middle.
#define ROCE_WRITE_MIDDLE 0x07
// BTH opcode: RDMA WRITE Last.
#define ROCE_WRITE_LAST 0x08
// BTH opcode: RDMA WRITE Last with Immediate.
#define ROCE_WRITE_LAST_IMM 0x09
// BTH opcode: RDMA WRITE Only (carries a RETH).
#define ROCE_WRITE_ONLY 0x0A
// BTH opcode: RDMA WRITE Only with Immediate (RETH and ImmDt).
#define ROCE_WRITE_ONLY_IMM 0x0B
// BTH opcode: RDMA READ Request (carries a RETH).
#define ROCE_READ_REQUEST 0x0C
// BTH opcode: RDMA READ Response First (carries an AETH).
#define ROCE_READ_RESPONSE_FIRST 0x0D
// BTH opcode: RDMA READ Response Middle.
#define ROCE_READ_RESPONSE_MIDDLE 0x0E
// BTH opcode: RDMA READ Response Last (carries an AETH).
#define ROCE_READ_RESPONSE_LAST 0x0F
// BTH opcode: RDMA READ Response Only (carries an AETH).
#define ROCE_READ_RESPONSE_ONLY 0x10
// BTH opcode: Acknowledge (ACK or NAK, carries an AETH).
#define ROCE_ACKNOWLEDGE 0x11

/* ---- gradswitch QP numbers (gradswitch/protocol/qpn.py) ---- */

// A job's QP number is job << QPN_JOB_SHIFT | local node << QPN_NODE_SHIFT | remote node: the switch reads the job there.
#define QPN_JOB_SHIFT 16
// Bit position of the local node's id in a QP number (the remote node's id is the low byte).
#define QPN_NODE_SHIFT 8

/* ---- table sizes ---- */

// IPv4 LPM routes per switch (one /32 per local host plus one prefix per remote edge switch).
#define IPV4_ROUTES_SIZE 1024
// ECMP groups per switch (one per distinct set of equal-cost next hops).
#define ECMP_GROUPS_SIZE 64
// Largest number of members (equal-cost next hops) of one ECMP group.
#define ECMP_MAX_MEMBERS 16
// Entries of the ECMP member table (groups x members).
#define ECMP_MEMBERS_SIZE 1024
// Hosts whose ARP requests the switch answers.
#define ARP_TABLE_SIZE 1024
// Ethernet destinations for L2 (non-IP) forwarding.
#define MAC_TABLE_SIZE 1024
// ACL rules (punt/copy to CPU, drop).
#define ACL_TABLE_SIZE 256
// Fault-injection rules (drop or corrupt a fraction of the packets leaving or entering a port).
#define FAULT_TABLE_SIZE 256

/* ---- load balancing over ECMP groups (docs/dlcp.md, "Load balancing") ---- */

// The multiplier of set_ecmp_group (and set_flowlet_group) that keeps the plain hash: member = CRC-16 of the
// 5-tuple mod the group's size. Any other is odd: a seeded hash (gradswitch/control/routing.py: hash_multiplier).
#define ECMP_PLAIN_MULTIPLIER 0x10000
// Flowlet slots per switch, a power of two (the low bits of the 5-tuple's CRC-16 pick one): when the slot last saw
// a packet, and its member.
#define FLOWLET_SLOTS 4096

/* ---- packet replication ---- */

// Multicast group that floods L2 broadcast to every host-facing port (the ingress port is pruned in egress).
#define BROADCAST_GROUP_ID 1
// Clone session that copies a packet to the CPU port (copy_to_cpu in the ACL).
#define CPU_CLONE_SESSION_ID 100

/* ---- fault injection ---- */

// Drop and corruption probabilities are given in parts per this many packets (1000000 = parts per million).
#define FAULT_SCALE 1000000

/* ---- NetReduce: in-network aggregation (docs/netreduce.md) ---- */

// int32 gradient values in one aggregation packet (1024 x 4 B = 4 KiB payload: the job's RoCE MTU is 4096; per-packet
// costs of BMv2 and of the Python hosts are amortized over 4x the values of a 1 KiB packet: docs/netreduce.md).
#define AGG_ELEMENTS_PER_PACKET 1024
// Bits of one wide payload field and of one aggregator register cell: 64 int32 lanes added at once (p4c's widest bit<>).
#define AGG_WORD_BITS 2048
// Wide fields per aggregation packet (and register cells per aggregator cell): AGG_ELEMENTS_PER_PACKET * 32 / AGG_WORD_BITS.
#define AGG_WORDS_PER_PACKET 16
// Packets per NetReduce message; a power of two, and every message starts at a PSN that is a multiple of it.
#define AGG_PACKETS_PER_MESSAGE 4
// log2 of AGG_PACKETS_PER_MESSAGE (message number = PSN >> this).
#define AGG_PACKETS_PER_MESSAGE_LOG2 2
// log2 of the bytes of one message (RETH.virtual_addr >> this = the message's window index).
#define AGG_MESSAGE_BYTES_LOG2 14
// Aggregator cells (one packet's sums each) shared by every job; a job's quota is 2 x credits x packets per message.
#define AGG_CELLS 2048
// Credits (messages in flight per worker) a job may have at most: the per-QP context entries per member.
#define AGG_MAX_CREDITS 8
// A cell's state is one 64-bit register cell: the contribution bitmap in its low AGG_MAX_MEMBERS bits, then
// the message number from this bit.
#define NR_CELL_MSG_SHIFT 32
// Bit position of a cell's contribution count (NR_CELL_COUNT_BITS bits) in its state.
#define NR_CELL_COUNT_SHIFT 54
// Bits of a cell's contribution count (at least enough for AGG_MAX_MEMBERS).
#define NR_CELL_COUNT_BITS 8
// Bit position of a cell's "final" flag (leaf: it holds its parent's result, not the local partial).
#define NR_CELL_FINAL_SHIFT 63
// Jobs a switch aggregates at once.
#define AGG_MAX_JOBS 16
// Members (workers, or child switches) of one job on one switch: the width of the contribution bitmap.
#define AGG_MAX_MEMBERS 32
// Member QPs (contributors and parent links) a switch knows, over all jobs.
#define AGG_MAX_QPS 256
// Multicast group of job j's results (to every local receiver, or every child) is NR_GROUP_BASE + j * NR_GROUPS_PER_JOB.
#define NR_GROUP_BASE 1024
// Multicast group ids reserved per job.
#define NR_GROUPS_PER_JOB 64
// A leaf's group that sends a partial up to its parent: the job's first group + this.
#define NR_GROUP_UP 1
// The group that answers connection (or child) i alone, for a retransmission: the job's first group + this + i.
#define NR_GROUP_PEER_BASE 8
// egress_rid of the copy a leaf sends up to its parent.
#define NR_RID_UP 1000
// egress_rid of the copy a spine sends down to child i is NR_RID_CHILD_BASE + i.
#define NR_RID_CHILD_BASE 512
// Job role of a switch: aggregates its workers and returns the results itself.
#define NR_ROLE_FLAT 1
// Job role of a switch: aggregates its local workers, sends partial sums up, returns its parent's results.
#define NR_ROLE_LEAF 2
// Job role of a switch: aggregates its children's partial sums and sends the results down.
#define NR_ROLE_SPINE 3
// Member kind: a worker QP or child switch whose packets are contributions.
#define NR_MEMBER_CONTRIBUTOR 1
// Member kind: the parent switch, whose packets are results.
#define NR_MEMBER_PARENT 2
// Events counted per job and per port (the stride of nr_job_events and nr_port_events).
#define NR_EVENTS 16
// Events one packet may count at most (completed_up: contribution, completion, partial-up; tally counts them).
#define NR_TALLY 3
// Event: a contribution was added to a cell.
#define NR_EV_CONTRIBUTION 0
// Event: a cell completed and its result was sent (or its partial sent up).
#define NR_EV_COMPLETION 1
// Event: a contribution already counted arrived again (dropped).
#define NR_EV_DUPLICATE 2
// Event: a retransmitted contribution of a complete cell was answered with the stored result.
#define NR_EV_RETRANSMITTED_RESULT 3
// Event: a contribution for a slot still holding an older message (over-sending, no credit): dropped.
#define NR_EV_NO_CREDIT 4
// Event: a packet naming a job it is not a member of: dropped.
#define NR_EV_NOT_MEMBER 5
// Event: a member's packet that is not a well-formed aggregation packet: dropped.
#define NR_EV_MALFORMED 6
// Event: a middle/last packet whose message the switch has no context for: dropped.
#define NR_EV_NO_CONTEXT 7
// Event: a contribution for a message older than the slot's: dropped.
#define NR_EV_STALE 8
// Event: a partial sum went up to the parent (leaf).
#define NR_EV_PARTIAL_UP 9
// Event: a result came down from the parent (leaf).
#define NR_EV_RESULT_DOWN 10
// Event: an aggregation packet whose ICRC is wrong (corrupted on the way): dropped before any register is touched.
#define NR_EV_BAD_ICRC 11
// Event: an all-gather placeholder (headers alone) that would complete a cell or be answered: refused (BMv2 cannot
// grow a packet by a payload to send it on); its sender resends it whole (zeros), which does.
#define NR_EV_PLACEHOLDER_LAST 12
// Event: a k-of-N job's contribution that came after its cell's sum was emitted without it (or a later packet of a
// message whose first packet did): dropped, never added (docs/faults.md, "Stragglers: k of N").
#define NR_EV_LATE 13
// Event: such a late contribution to a cell that holds its message's sum: answered with the sum on its connection
// only (its receiver ACKs the sender), not added.
#define NR_EV_LATE_ANSWERED 14
// Event: a k-of-N job's cell closed with fewer than k members in, its deadline passed (set_job's deadline_us): its sum
// left with the members it holds (docs/faults.md, "Stragglers: k of N").
#define NR_EV_DEADLINE 15
// A k-of-N job (set_job's quorum below its members) emits a cell's sum once `quorum` members are in; the Last packet
// of each result carries the bitmap of the members the sum holds in its ImmDt from this bit up (member bit b = rank
// b), the message number in the bits below.
#define NR_IMM_MEMBERS_SHIFT 16
// Most workers of a k-of-N job: its contributors' bitmap must fit the ImmDt above NR_IMM_MEMBERS_SHIFT.
#define NR_KOFN_MAX_MEMBERS 16
// A message's owner field is RETH.virtual_addr >> this (the window index sits below it): 0 for an all-reduce message
// (every receiver gets the sum), r + 1 for a reduce-scatter message whose shard rank r owns (r gets the sum, every
// other receiver the packet's headers alone, trimmed as a DLCP drop notification, which keeps its RC connection's
// PSNs whole: docs/netreduce.md, "Reduce-scatter"). A job's set_job says how many owner fields it accepts.
#define NR_OWNER_VA_SHIFT 18
// Bits of the window index in a per-QP context entry (a window holds 2 x AGG_MAX_CREDITS messages at most).
#define NR_CTX_WINDOW_BITS 4
// Bits of the owner in a per-QP context entry (an owner is a rank below AGG_MAX_MEMBERS).
#define NR_CTX_OWNER_BITS 5
// An all-gather job (set_job's gather 1) reads a message's owner field the other way round: rank r (owner field
// r + 1) sends the message's values, every other rank a placeholder, the packet's headers alone marked trimmed,
// which the switch takes as zeros; the sum (r's values) goes whole to every receiver but r, which gets the headers.
// The receiver of a switch-to-switch copy (a partial up, a result down): never trimmed.
#define NR_RECEIVER_SWITCH 255

/* ---- DLCP: per-packet priority, bounded-loss dropping, spraying (docs/dlcp.md) ---- */

// Jobs with DLCP settings on a switch (job id = destination QP >> QPN_JOB_SHIFT, below this).
#define DLCP_MAX_JOBS 64
// A packet's class in BTH.resv7: droppable << DLCP_DROPPABLE_SHIFT | layer << DLCP_LAYER_SHIFT | magnitude << DLCP_MAGNITUDE_SHIFT.
#define DLCP_DROPPABLE_SHIFT 6
// Bit position of the layer class in BTH.resv7.
#define DLCP_LAYER_SHIFT 3
// Layer classes (3 bits): class 0 holds the front layers.
#define DLCP_LAYER_CLASSES 8
// Bit position of the magnitude class in BTH.resv7.
#define DLCP_MAGNITUDE_SHIFT 1
// Magnitude classes (2 bits): class 3 holds a tensor's largest values.
#define DLCP_MAGNITUDE_CLASSES 4
// Class -> priority rules (ternary on BTH.resv7) over all jobs.
#define DLCP_CLASS_RULES 256
// A job's features in meta.dlcp.features (dlcp_jobs' set_features): strict priority by class.
#define DLCP_F_PRIORITY 4
// ... dropping droppable packets over their queue's threshold (bounded loss).
#define DLCP_F_DROP 2
// ... spraying packets over ECMP members (the PSN in the flow hash).
#define DLCP_F_SPRAY 1
// Priority given to the ACKs of a DLCP job with priority on, and to every trimmed packet (a drop notification).
#define DLCP_ACK_PRIORITY 7
// Bit position in BTH.resv7 of the TRIMMED bit: the switch cut this packet's payload (DLCP's selective drop) and
// forwarded its headers as a drop notification; no host sets it.
#define DLCP_TRIMMED_SHIFT 0
// Priority of every RoCE v2 packet when the RoCE class is on (table roce_class): above bulk traffic (0), at the
// lowest of DLCP's default layer priorities (1-6), which a DLCP job with priority on gets instead, below its ACKs (7).
#define ROCE_CLASS_PRIORITY 1
// Events counted per job (stride of dlcp_events).
#define DLCP_EVENTS 4
// Event: a droppable packet was kept (its queue under the threshold).
#define DLCP_EV_KEPT 0
// Event: a droppable packet was dropped (its queue at or over the threshold).
#define DLCP_EV_DROPPED 1
// Event: a packet was classified into a priority queue.
#define DLCP_EV_CLASSIFIED 2
// Port rates of the virtual queues are in bytes per 1024 microseconds (128 x Mb/s).
#define DLCP_RATE_SHIFT 10

/* ---- reasons a packet is sent to the controller (packet_in.reason) ---- */

// ARP request for an address the switch has no entry for.
#define PUNT_ARP_MISS 1
// An ACL rule sent (punt) or copied (copy) the packet to the CPU.
#define PUNT_ACL 2

/* ---- reasons a packet is dropped (index of the drop_reasons counter) ---- */

// Parser error (truncated or unsupported header) or bad IPv4 checksum.
#define DROP_MALFORMED 0
// IPv4 TTL was 0 or 1 on arrival.
#define DROP_TTL_EXPIRED 1
// No IPv4 route, no ECMP member, or no L2 entry for the destination.
#define DROP_NO_ROUTE 2
// The fault-injection table chose to drop the packet.
#define DROP_FAULT_INJECTED 3
// An ACL rule dropped the packet.
#define DROP_ACL 4
// ARP that is not a request (replies and gratuitous ARP are not forwarded).
#define DROP_ARP_OTHER 5
// NetReduce refused the packet (details in the nr_*_events counters).
#define DROP_NETREDUCE_REFUSED 6
// NetReduce dropped an aggregation packet whose ICRC is wrong (corrupted on the wire; the sender retransmits it).
#define DROP_BAD_ICRC 8
// Number of drop reasons (size of the drop_reasons counter).
#define DROP_REASONS 16

#endif
