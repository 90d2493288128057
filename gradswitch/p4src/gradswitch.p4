/*
 * gradswitch: the switch program of the testbed (v1model, BMv2 simple_switch_grpc).
 *
 * This file only wires the controls of include/controls/; sizes live in
 * include/config.p4, headers in include/headers.p4, parsing in include/parser.p4.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/config.p4"
#include "include/types.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/actions.p4"
#include "include/controls/packet_io.p4"
#include "include/controls/port_counters.p4"
#include "include/controls/fault_injection.p4"
#include "include/controls/arp.p4"
#include "include/controls/l2_forwarding.p4"
#include "include/controls/l3_forwarding.p4"
#include "include/controls/acl.p4"
#include "include/controls/netreduce.p4"
#include "include/controls/netreduce_scatter.p4"
#include "include/controls/dlcp.p4"

control GradswitchIngress(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t std_meta) {
    PacketIoIngress() packet_io;
    PortRxCounters() rx_counters;
    FaultInjection() ingress_faults;
    ArpResponder() arp;
    L2Forwarding() l2;
    Ipv4Routing() l3;
    Acl() acl;
    NetReduceIngress() netreduce;
    DlcpIngress() dlcp;
    DropCounters() drop_counters;

    apply {
        if (hdr.packet_out.isValid()) {
            packet_io.apply(hdr, meta, std_meta);
        } else {
            rx_counters.apply(meta, std_meta);
            if (std_meta.parser_error != error.NoError || std_meta.checksum_error == 1) {
                drop_with_reason(meta, std_meta, DROP_MALFORMED);
            } else {
                ingress_faults.apply(std_meta.ingress_port, hdr, meta, std_meta);
                // DLCP and NetReduce act on RoCE packets only; any other packet skips both (with
                // BMv2 logging macros every table, action and condition it meets costs a log record).
                // Their metadata then keeps the zeros BMv2 gives every packet (not consumed, no emit,
                // priority 0, no spray key).
                if (!meta.dropped && hdr.bth.isValid()) {
                    dlcp.apply(hdr, meta, std_meta);
                    netreduce.apply(hdr, meta, std_meta);
                }
                // (p4c's check of header validity wants Ethernet's here: controls/icrc.p4 takes it out and puts it back.)
                if (!meta.dropped && !meta.nr.consumed && hdr.ethernet.isValid()) {
                    if (hdr.ipv4.isValid()) {  // (first: the common case meets one condition)
                        l3.apply(hdr, meta, std_meta);
                    } else if (hdr.arp.isValid()) {
                        arp.apply(hdr, meta, std_meta);
                    } else {
                        l2.apply(hdr, meta, std_meta);
                    }
                    acl.apply(hdr, meta, std_meta);
                }
            }
            drop_counters.apply(meta);
        }
    }
}

control GradswitchEgress(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t std_meta) {
    FaultInjection() egress_faults;
    NetReduceEgress() netreduce_egress;
    NetReduceScatterEgress() netreduce_scatter;
    DlcpEgress() dlcp_egress;
    SourceMacRewrite() source_mac;
    PacketIoEgress() packet_io;
    PortTxCounters() tx_counters;
    DropCounters() drop_counters;

    apply {
        if (std_meta.egress_port == CPU_PORT) {
            packet_io.apply(hdr, meta, std_meta);
        } else if (!meta.nr.emit && std_meta.instance_type == PKT_INSTANCE_TYPE_REPLICATION
                   && std_meta.egress_port == std_meta.ingress_port) {
            // A flooded copy never goes back where it came from.
            mark_to_drop(std_meta);
        } else {
            if (meta.nr.emit) {
                netreduce_egress.apply(hdr, meta, std_meta);
                if (meta.nr_copy.owner != 0) {  // a reduce-scatter or all-gather job's message
                    netreduce_scatter.apply(hdr, meta, std_meta);
                }
            }
            if (!meta.dropped) {
                egress_faults.apply(std_meta.egress_port, hdr, meta, std_meta);
            }
            if (!meta.dropped) {
                dlcp_egress.apply(hdr, meta, std_meta);
            }
            if (!meta.dropped) {
                source_mac.apply(hdr, meta, std_meta);
                tx_counters.apply(meta, std_meta);
            }
            drop_counters.apply(meta);
        }
    }
}

V1Switch(GradswitchParser(),
         GradswitchVerifyChecksum(),
         GradswitchIngress(),
         GradswitchEgress(),
         GradswitchComputeChecksum(),
         GradswitchDeparser()) main;
