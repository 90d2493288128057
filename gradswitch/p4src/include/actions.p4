/*
 * Actions every control shares. A dropped packet carries its reason in the
 * metadata; the pipeline counts it once, at the end of ingress or egress.
 */
#ifndef _GRADSWITCH_ACTIONS_P4_
#define _GRADSWITCH_ACTIONS_P4_

#include <core.p4>
#include <v1model.p4>

#include "headers.p4"

// Drop the packet and remember why (DROP_* in config.p4): drop_with_reason(meta, std_meta, DROP_ACL);
//
// A macro, not an action: p4c inlines a call of an action with an `inout standard_metadata_t`
// parameter as a copy of all 17 of its fields into a temporary and back, and every such
// temporary (one per inlined call: 22 of them, 374 fields) is metadata that BMv2 zeroes for every packet
// it receives, whether the call runs or not. That zeroing, field by field in the packet
// receiving thread, is most of what a packet costs BMv2 (bench/forwarding.py).
#define drop_with_reason(META, STD_META, REASON) { \
    mark_to_drop(STD_META); \
    META.dropped = true; \
    META.drop_reason = (REASON); \
}

#endif
