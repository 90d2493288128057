/*
 * The aggregation payload: AGG_ELEMENTS_PER_PACKET big-endian int32 gradient values, held as
 * AGG_WORDS_PER_PACKET wide fields of AGG_WORD_BITS bits (64 int32 lanes each), and the
 * lane-wise addition that sums two such fields.
 *
 * BMv2 pays per primitive, not per bit: one wide field added, read and written costs what one
 * int32 would, so a packet's 1024 values take 16 additions instead of 1024 (docs/netreduce.md,
 * "Lane arithmetic"). P4 has no loops, so the per-word code is written once as a macro and
 * expanded for every word by AGG_FOR_EACH_WORD. The expansion below is for 16 words; config.p4
 * must say the same (checked here and by tests/unit/test_constants.py).
 */
#ifndef _GRADSWITCH_AGG_PAYLOAD_P4_
#define _GRADSWITCH_AGG_PAYLOAD_P4_

#include "config.p4"

#if AGG_WORDS_PER_PACKET * AGG_WORD_BITS != AGG_ELEMENTS_PER_PACKET * 32
#error "config.p4: AGG_WORDS_PER_PACKET x AGG_WORD_BITS must hold AGG_ELEMENTS_PER_PACKET int32 values"
#endif
#if AGG_WORDS_PER_PACKET != 16 || AGG_WORD_BITS != 2048
#error "agg_payload.p4 expands 16 words of 2048 bits: extend AGG_FOR_EACH_WORD and the lane masks"
#endif

#define AGG_FOR_EACH_WORD(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)

#define AGG_WORD_FIELD(q) bit<AGG_WORD_BITS> w##q;

// The gradient values of one packet: word q holds values 64q .. 64q+63, value 64q in its top lane.
header agg_payload_h {
    AGG_FOR_EACH_WORD(AGG_WORD_FIELD)
}

// Bit 31 of every 32-bit lane (H), and the other 31 bits (L = ~H), of one wide word.
#define AGG_LANE_HIGH_64 64w0x8000000080000000
#define AGG_LANE_HIGH_512 (AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64 \
                           ++ AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64 ++ AGG_LANE_HIGH_64)
const bit<AGG_WORD_BITS> AGG_LANE_HIGH = AGG_LANE_HIGH_512 ++ AGG_LANE_HIGH_512 ++ AGG_LANE_HIGH_512 ++ AGG_LANE_HIGH_512;
const bit<AGG_WORD_BITS> AGG_LANE_LOW = ~AGG_LANE_HIGH;

// Every 32-bit lane of a plus every lane of b, mod 2^32 (int32 wrap-around), no carry between lanes:
// the low 31 bits are added with their carry stopping at bit 31, and bit 31 is a31 ^ b31 ^ that carry.
#define AGG_LANE_ADD(a, b) ((((a) & AGG_LANE_LOW) + ((b) & AGG_LANE_LOW)) ^ (((a) ^ (b)) & AGG_LANE_HIGH))

#endif
