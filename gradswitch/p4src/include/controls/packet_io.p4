/*
 * PacketIo: packet-out from the controller and packet-in to it through CPU_PORT.
 */
#ifndef _GRADSWITCH_PACKET_IO_P4_
#define _GRADSWITCH_PACKET_IO_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"

// A packet-out leaves by the port its header names, untouched otherwise.
control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t std_meta) {
    apply {
        std_meta.egress_spec = hdr.packet_out.egress_port;
        hdr.packet_out.setInvalid();
    }
}

// Every packet leaving by CPU_PORT (punted or cloned) gets the packet_in header.
control PacketIoEgress(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t std_meta) {
    apply {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (port_t)meta.ingress_port;
        hdr.packet_in._pad = 0;
        hdr.packet_in.reason = meta.punt_reason;
    }
}

#endif
