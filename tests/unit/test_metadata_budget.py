"""What every packet costs BMv2 before its pipeline runs: one zeroing per metadata field (about 650
instructions each, in the switch's one receiving thread; docs/architecture.md, "What a packet
costs BMv2"). Read from the committed compile (tests/bmv2/test_build.py checks it is fresh)."""

from __future__ import annotations

import json
import re
from typing import Any

from gradswitch.protocol.paths import BMV2_JSON

# The program's metadata fields (standard_metadata's 17 included): 589 in its first version, 145
# before NetReduce's working state became a header, 42 now. Raise it only on purpose: each one is
# paid by every packet, NetReduce's or not.
METADATA_FIELDS = 42
# Headers kept in the metadata, valid only while used (their fields are zeroed only then).
STATE_HEADERS = {"nr_state", "dlcp_state", "fault", "flow_key"}


def compiled() -> dict[str, Any]:
    program: dict[str, Any] = json.loads(BMV2_JSON.read_text())
    return program


def test_every_packet_zeroes_at_most_the_budgeted_metadata_fields():
    program = compiled()
    types = {t["name"]: t for t in program["header_types"]}
    fields = {(h["name"], f[0]) for h in program["headers"] if h["metadata"]
              for f in types[h["header_type"]]["fields"] if not f[0].startswith("_padding")}
    temporaries = sorted(f for h, f in fields if h == "scalars" and not f.startswith("local_metadata_t."))
    assert len(fields) <= METADATA_FIELDS, (
        f"{len(fields)} metadata fields, budget {METADATA_FIELDS}; p4c's temporaries and locals: {temporaries}")


def test_working_state_lives_in_headers_that_are_not_zeroed_for_every_packet():
    # p4c names a header of the metadata struct userMetadata._<name><index>
    instances = {re.sub(r"^userMetadata\._(.*?)\d+$", r"\1", h["name"]): h for h in compiled()["headers"]}
    assert set(instances) >= STATE_HEADERS, sorted(instances)
    for name in STATE_HEADERS:
        assert not instances[name]["metadata"], instances[name]  # a header instance: zeroed only by setValid
