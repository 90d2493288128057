/*
 * Actions every control shares. A dropped packet carries its reason in the
 * metadata; the pipeline counts it once, at the end of ingress or egress.
 */
#ifndef _GRADSWITCH_ACTIONS_P4_
#define _GRADSWITCH_ACTIONS_P4_

#include <core.p4>
#include <v1model.p4>

#include "headers.p4"

// Drop the packet and remember why (DROP_* in config.p4).
action drop_with_reason(inout local_metadata_t meta,
                        inout standard_metadata_t std_meta,
                        in bit<8> reason) {
    mark_to_drop(std_meta);
    meta.dropped = true;
    meta.drop_reason = reason;
}

#endif
