/*
 * NetReduce reduce-scatter (docs/netreduce.md, "Reduce-scatter"): the switches sum a job's messages exactly as for
 * all-reduce (controls/netreduce.p4), but the sum of a message goes whole only to the rank that owns its shard,
 * named by the first packet's RETH (the owner field above the window index, rank + 1, kept in the per-QP context
 * for the message's later packets). Every other receiver gets its copy, rewritten into its own connection like any result, trimmed
 * to its headers (controls/trim.p4), in the class of the connection's whole copies (its DSCP kept, so that it
 * leaves behind them): the PSN counts on its RC connection and the sender is acknowledged end to
 * end, for 58 to 74 bytes instead of 4 KiB. Copies between switches (partials up, results down) stay whole.
 *
 * All-gather (a job whose set_job says gather): the message's owner sends its values, every other rank a
 * placeholder of headers alone (NetReduceIngress takes it as zeros), and the sum, the owner's values, goes whole
 * to every receiver but the owner, whose copy is trimmed: each shard crosses each link once.
 *
 * Applied in egress after NetReduceEgress has rewritten the copy (meta.nr_copy.receiver: the connection's receiver).
 */
#ifndef _GRADSWITCH_NETREDUCE_SCATTER_P4_
#define _GRADSWITCH_NETREDUCE_SCATTER_P4_

#include <core.p4>
#include <v1model.p4>

#include "../headers.p4"
#include "trim.p4"

control NetReduceScatterEgress(inout headers_t hdr,
                               inout local_metadata_t meta,
                               inout standard_metadata_t std_meta) {
    TrimPayload(false) trimmer;  // in its connection's class, in order

    apply {
        // (Applied to copies of owned messages, or of an all-gather job's: meta.nr_copy.owner is the owner's rank
        // + 1, bit 7 set for all-gather.) Reduce-scatter: the owner's copy is whole, the others are trimmed;
        // all-gather: the other way round (an all-reduce message's, owner 0, is nobody's: whole).
        if (meta.nr_copy.receiver != NR_RECEIVER_SWITCH
                && (meta.nr_copy.receiver + 1 == (meta.nr_copy.owner & 0x7F)) == (meta.nr_copy.owner >= 0x80)) {
            trimmer.apply(hdr, meta, std_meta);
        }
    }
}

#endif
