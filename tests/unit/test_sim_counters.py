"""The simulator's queue-pair counters are gradswitch/roce/qp.py's: the same names, counted by the same side.

results.json puts a run's requester and responder counters side by side for both backends (gradswitch/hosts/comm.py
Comm.stats, and gradswitch/sim/ns3/model/gs-job-node.cc after it), so a name the simulator spells differently, or
counts on the other side, makes BMv2 and ns-3 rows disagree without an error. These read both sources and fail on drift.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.roce.headers import NakCode

QP_H = REPO_ROOT / "gradswitch/sim/ns3/model/gs-qp.h"
PYTHON_SIDES = {"Requester": "requester", "Responder": "responder", "OrderTolerantResponder": "responder"}
# Counted by the Python hosts only, each for a reason the simulator does not have.
PYTHON_ONLY = {
    "rnr_naks": "the simulator's receivers always have a buffer posted: no receiver-not-ready NAK is sent",
    "placed_ahead": "the simulator applies a buffered packet's data when the expected PSN reaches it (placing "
                    "costs no simulated time, so the timing is the same): nothing is placed ahead of a hole",
}


def _cpp_counters(text: str) -> dict[str, str]:
    """name -> side, from the Counter enum, kCounterNames and IsRequesterCounter."""
    enum = re.search(r"enum Counter\s*\{(.*?)\};", text, re.S)
    names = re.search(r"kCounterNames\[C_COUNT\]\s*=\s*\{(.*?)\};", text, re.S)
    requester = re.search(r"IsRequesterCounter\(int c\)\s*\{(.*?)\}", text, re.S)
    assert enum and names and requester, f"{QP_H.name}: the Counter enum, kCounterNames or IsRequesterCounter moved"
    members = [m for m in re.findall(r"\b(C_[A-Z_]+)\b", enum.group(1)) if m != "C_COUNT"]
    spelled = re.findall(r'"([a-z_]+)"', names.group(1))
    assert len(members) == len(spelled), f"{len(members)} counters but {len(spelled)} names in kCounterNames"
    on_requester = set(re.findall(r"\b(C_[A-Z_]+)\b", requester.group(1)))
    assert on_requester <= set(members), f"IsRequesterCounter names unknown counters {on_requester - set(members)}"
    for member, name in zip(members, spelled, strict=True):
        assert member == "C_" + name.upper(), f"{member} is named {name!r} in kCounterNames: the order drifted"
    pairs = zip(members, spelled, strict=True)
    return {name: "requester" if member in on_requester else "responder" for member, name in pairs}


def _returned_nak_codes(cls: ast.ClassDef) -> list[str]:
    """The NAK codes a class's methods return (`return NakCode.X`), as counter names."""
    codes = {ast.unparse(r.value) for r in ast.walk(cls) if isinstance(r, ast.Return) and r.value is not None}
    return sorted(code.name.lower() for code in NakCode if f"NakCode.{code.name}" in codes)


def _python_counters(*sources: Path) -> dict[str, set[str]]:
    """name -> the sides whose classes count it (`self.counters.add("name")`, or each NAK code the class
    returns for `self.counters.add(error.name.lower())`)."""
    sides: dict[str, set[str]] = {}
    for source in sources:
        for cls in ast.walk(ast.parse(source.read_text())):
            if not isinstance(cls, ast.ClassDef) or cls.name not in PYTHON_SIDES:
                continue
            for call in ast.walk(cls):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add"
                        and ast.unparse(call.func.value) == "self.counters"):
                    continue
                arg = call.args[0]
                # a name, or a choice of names (`"retransmitted" if again else "sent"`)
                found = [n.value for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                if ast.unparse(arg) == "error.name.lower()":
                    found = _returned_nak_codes(cls)
                elif not found:
                    raise AssertionError(f"{source.name}: counter {ast.unparse(arg)} is neither a name nor a NAK code")
                for name in found:
                    sides.setdefault(name, set()).add(PYTHON_SIDES[cls.name])
    return sides


CPP = _cpp_counters(QP_H.read_text())
PYTHON = _python_counters(REPO_ROOT / "gradswitch/roce/qp.py", REPO_ROOT / "gradswitch/roce/order_tolerant.py")


def test_python_counts_each_name_on_one_side():
    assert {n: s for n, s in PYTHON.items() if len(s) != 1} == {}


@pytest.mark.parametrize("name", sorted(CPP))
def test_the_simulator_counts_a_name_the_hosts_count_on_the_same_side(name):
    assert name in PYTHON, f"the simulator counts {name!r}, which gradswitch/roce/qp.py never does"
    assert PYTHON[name] == {CPP[name]}, f"{name!r}: the simulator's {CPP[name]}, gradswitch/roce/qp.py's {PYTHON[name]}"


def test_every_host_counter_is_in_the_simulator_or_explained():
    missing = set(PYTHON) - set(CPP) - set(PYTHON_ONLY)
    assert missing == set(), f"counted by gradswitch/roce/qp.py but not by the simulator: {sorted(missing)}"
    assert set(PYTHON_ONLY) <= set(PYTHON), "PYTHON_ONLY names a counter gradswitch/roce/qp.py no longer has"


def test_the_reader_catches_a_name_counted_on_the_other_side():
    text = QP_H.read_text().replace("c == C_TIMEOUTS", "c == C_TIMEOUTS || c == C_DUPLICATES")
    moved = _cpp_counters(text)
    assert moved["duplicates"] == "requester" and PYTHON["duplicates"] == {"responder"}


def test_the_reader_catches_names_out_of_order():
    text = QP_H.read_text().replace('"accepted", "duplicates"', '"duplicates", "accepted"')
    with pytest.raises(AssertionError, match="order drifted"):
        _cpp_counters(text)
