/*
 * gradswitch types: typedefs and protocol numbers (fixed by the standards, not tunable).
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

const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_IPV4 = 0x0800;

const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;

const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_OP_REQUEST = 1;
const bit<16> ARP_OP_REPLY = 2;

// InfiniBand BTH opcodes of the Reliable Connection transport (IBTA vol. 1, 9.2).
const bit<8> ROCE_SEND_FIRST              = 0x00;
const bit<8> ROCE_SEND_MIDDLE             = 0x01;
const bit<8> ROCE_SEND_LAST               = 0x02;
const bit<8> ROCE_SEND_LAST_IMM           = 0x03;
const bit<8> ROCE_SEND_ONLY               = 0x04;
const bit<8> ROCE_SEND_ONLY_IMM           = 0x05;
const bit<8> ROCE_WRITE_FIRST             = 0x06;
const bit<8> ROCE_WRITE_MIDDLE            = 0x07;
const bit<8> ROCE_WRITE_LAST              = 0x08;
const bit<8> ROCE_WRITE_LAST_IMM          = 0x09;
const bit<8> ROCE_WRITE_ONLY              = 0x0A;
const bit<8> ROCE_WRITE_ONLY_IMM          = 0x0B;
const bit<8> ROCE_READ_REQUEST            = 0x0C;
const bit<8> ROCE_READ_RESPONSE_FIRST     = 0x0D;
const bit<8> ROCE_READ_RESPONSE_MIDDLE    = 0x0E;
const bit<8> ROCE_READ_RESPONSE_LAST      = 0x0F;
const bit<8> ROCE_READ_RESPONSE_ONLY      = 0x10;
const bit<8> ROCE_ACKNOWLEDGE             = 0x11;

#endif
