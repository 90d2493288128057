"""The committed BMv2 JSON and P4Info are what p4c makes of the current sources.

Another p4c writes other bytes (ids, source positions): the comparison runs with the p4c version the committed
program's stamp records (gradswitch/p4src/build/p4c-stamp.json) and skips, naming both versions, with another one;
with GRADSWITCH_REQUIRE_TOOLCHAIN=1 (.ci/run, whose shared toolchain has the p4c the program is built with) that
fails instead. Whatever the compiler, tests/unit/test_package_data.py checks the stamp's hash of the sources
against the sources.
"""

from __future__ import annotations

import pytest

from gradswitch.cli.p4_compile import BuildError, BuildStamp, compile_program, p4c_version
from gradswitch.protocol.paths import BMV2_JSON, P4_PROGRAM, P4INFO
from tests.require import missing

pytestmark = pytest.mark.p4c


def test_committed_artifacts_are_fresh(tmp_path, pytestconfig):
    stamped, here = BuildStamp.read().p4c_version, p4c_version()
    if here != stamped:
        missing("toolchain", f"p4c {here} here, the committed program is p4c {stamped}'s: their outputs differ in "
                "bytes whatever the sources", forced=bool(pytestconfig.getoption("--require-toolchain")), label="p4c")
    result = compile_program(P4_PROGRAM, tmp_path / "gradswitch.json", tmp_path / "gradswitch.p4info.txtpb")
    stale = [name for fresh, committed, name in ((result.json, BMV2_JSON, "JSON"), (result.p4info, P4INFO, "P4Info"))
             if fresh.read_bytes() != committed.read_bytes()]
    assert not stale, f"committed {', '.join(stale)} out of date: run `make build` and commit gradswitch/p4src/build/"


def test_warnings_fail_the_build(tmp_path):
    bad = tmp_path / "warn.p4"
    bad.write_text("""
#include <core.p4>
#include <v1model.p4>
struct h_t {} struct m_t {}
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control V(inout h_t h, inout m_t m) { apply {} }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) {
    apply { bit<8> x; s.egress_spec = (bit<9>)x; }  // x is read uninitialised: a warning
}
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control C(inout h_t h, inout m_t m) { apply {} }
control D(packet_out p, in h_t h) { apply {} }
V1Switch(P(), V(), I(), E(), C(), D()) main;
""")
    with pytest.raises(BuildError, match=r"(?i)warning|uninitialized"):
        compile_program(bad, tmp_path / "w.json", tmp_path / "w.txtpb")
