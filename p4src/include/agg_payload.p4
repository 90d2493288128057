/*
 * The aggregation payload: AGG_ELEMENTS_PER_PACKET int32 gradient values, one header field each.
 *
 * P4 has no loops, so the per-element code is written once as a macro and expanded for
 * every element index by AGG_FOR_EACH (statements) and AGG_LIST (comma-separated lists,
 * e.g. the ICRC field list). The expansion below is for 64 elements; config.p4's
 * AGG_ELEMENTS_PER_PACKET must say the same (checked here and by tests/unit/test_constants.py).
 */
#ifndef _GRADSWITCH_AGG_PAYLOAD_P4_
#define _GRADSWITCH_AGG_PAYLOAD_P4_

#include "config.p4"

#if AGG_ELEMENTS_PER_PACKET != 64
#error "agg_payload.p4 expands 64 elements: regenerate it for AGG_ELEMENTS_PER_PACKET"
#endif

#define AGG_FOR_EACH(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16) \
    M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31) M(32) \
    M(33) M(34) M(35) M(36) M(37) M(38) M(39) M(40) M(41) M(42) M(43) M(44) M(45) M(46) M(47) M(48) \
    M(49) M(50) M(51) M(52) M(53) M(54) M(55) M(56) M(57) M(58) M(59) M(60) M(61) M(62) M(63)

#define AGG_LIST(M) \
    M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7), M(8), M(9), M(10), M(11), M(12), M(13), M(14), \
    M(15), M(16), M(17), M(18), M(19), M(20), M(21), M(22), M(23), M(24), M(25), M(26), M(27), \
    M(28), M(29), M(30), M(31), M(32), M(33), M(34), M(35), M(36), M(37), M(38), M(39), M(40), \
    M(41), M(42), M(43), M(44), M(45), M(46), M(47), M(48), M(49), M(50), M(51), M(52), M(53), \
    M(54), M(55), M(56), M(57), M(58), M(59), M(60), M(61), M(62), M(63)

#define AGG_FIELD(i) bit<32> e##i;

// The gradient values of one packet, big-endian int32 (two's complement sums wrap like int32).
header agg_payload_h {
    AGG_FOR_EACH(AGG_FIELD)
}

#endif
