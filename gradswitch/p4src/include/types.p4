/*
 * gradswitch types: typedefs and BMv2's packet instance types (protocol numbers are in config.p4).
 */
#ifndef _GRADSWITCH_TYPES_P4_
#define _GRADSWITCH_TYPES_P4_

typedef bit<9>  port_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> ecmp_group_t;
typedef bit<16> ecmp_index_t;
typedef bit<24> qpn_t;
typedef bit<24> psn_t;

// standard_metadata.instance_type values of BMv2 simple_switch.
const bit<32> PKT_INSTANCE_TYPE_NORMAL = 0;
const bit<32> PKT_INSTANCE_TYPE_INGRESS_CLONE = 1;
const bit<32> PKT_INSTANCE_TYPE_EGRESS_CLONE = 2;
const bit<32> PKT_INSTANCE_TYPE_RECIRC = 4;
const bit<32> PKT_INSTANCE_TYPE_REPLICATION = 5;
const bit<32> PKT_INSTANCE_TYPE_RESUBMIT = 6;

#endif
