/*
 * PortCounters: packets and bytes received and sent per port, and drops by reason.
 */
#ifndef _GRADSWITCH_PORT_COUNTERS_P4_
#define _GRADSWITCH_PORT_COUNTERS_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"

control PortRxCounters(in local_metadata_t meta, in standard_metadata_t std_meta) {
    // Packets/bytes received, indexed by ingress port.
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_rx;
    apply {
        port_rx.count(meta.ingress_port);  // (std_meta.ingress_port as 32 bits: a cast here would be a temporary)
    }
}

control PortTxCounters(in local_metadata_t meta, in standard_metadata_t std_meta) {
    // Packets/bytes sent, indexed by egress port (dropped packets are not counted).
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_tx;
    apply {
        port_tx.count((bit<32>)std_meta.egress_port);
    }
}

// Counts a packet a control of this pipeline dropped, once, under its DROP_* reason.
control DropCounters(in local_metadata_t meta) {
    counter(DROP_REASONS, CounterType.packets) drops;
    apply {
        if (meta.dropped) {
            drops.count(meta.drop_reason);
        }
    }
}

#endif
