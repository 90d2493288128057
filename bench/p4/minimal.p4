/* The smallest useful v1model program: one exact table from ingress port to egress port.
 * bench/forwarding.py compares its forwarding rate with gradswitch.p4's on the same BMv2. */
#include <core.p4>
#include <v1model.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_h ethernet; }
struct meta_t {}

parser MinParser(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start { p.extract(h.ethernet); transition accept; }
}
control MinVerify(inout headers_t h, inout meta_t m) { apply {} }
control MinIngress(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    action forward(bit<9> port) { s.egress_spec = port; }
    action drop() { mark_to_drop(s); }
    table port_map {
        key = { s.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply { port_map.apply(); }
}
control MinEgress(inout headers_t h, inout meta_t m, inout standard_metadata_t s) { apply {} }
control MinCompute(inout headers_t h, inout meta_t m) { apply {} }
control MinDeparser(packet_out p, in headers_t h) { apply { p.emit(h.ethernet); } }
V1Switch(MinParser(), MinVerify(), MinIngress(), MinEgress(), MinCompute(), MinDeparser()) main;
