/*
 * gradswitch configuration: every size and shared constant of the switch program.
 *
 * This file is the single source of these values. The Python side
 * (controller/constants.py) parses the `#define NAME VALUE` lines below, so a
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

/* ---- protocols ---- */

// UDP destination port of RoCE v2 (IANA).
#define ROCE_V2_UDP_PORT 4791

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
// Fault-injection rules (drop a fraction of the packets leaving or entering a port).
#define FAULT_TABLE_SIZE 256

/* ---- packet replication ---- */

// Multicast group that floods L2 broadcast to every host-facing port (the ingress port is pruned in egress).
#define BROADCAST_GROUP_ID 1
// Clone session that copies a packet to the CPU port (copy_to_cpu in the ACL).
#define CPU_CLONE_SESSION_ID 100

/* ---- fault injection ---- */

// Drop probabilities are given in parts per this many packets (1000000 = parts per million).
#define FAULT_SCALE 1000000

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
// Number of drop reasons (size of the drop_reasons counter).
#define DROP_REASONS 16

#endif
