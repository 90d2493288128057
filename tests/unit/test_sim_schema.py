"""The simulator's configuration and results keys are defined once (gradswitch/sim/sim_schema.py, with its --tables
and --constants outputs): gs-keys.h, sim_keys.py and docs/simulator-keys.md are what it generates (schema_files.py);
the C++ names no key of any of them by a string literal, reads every key of the configuration with the schema's
type (Get<T>, Object, Section, Choice and its values, ...) and reads and writes no key the schema does not have; and
every configuration Python writes (ring, PS with training, NetReduce, DLCP, graph jobs in and out of the network,
every kind of fault, background TCP, TensorLights, MPI) holds only keys of the schema, each of its type, and every
key it requires; and the keys Python reads of the results are keys of the schema. No simulator needed:
tests/ns3/test_sim_schema_results.py checks what gradswitch-sim writes against the schema."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import DlcpOptions, ExperimentSpec, Topo
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.sim import schema_files, sim_schema
from gradswitch.sim.graph_run import GraphTransport, config, job_config, placement
from gradswitch.sim.ranks import MpiSync, partition
from gradswitch.sim.results import RESULTS_FORMAT
from gradswitch.sim.sim_config import FORMAT, run_config
from gradswitch.sim.sim_schema import CONFIG, RESULTS, Document, problems
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.faults import parse_fault
from gradswitch.topology.generators import rack
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    world_group,
)
from gradswitch.workload.job import Algorithm, Crash, Device, Emulation

SOURCES = Path(sim_schema.__file__).resolve().parent / "ns3"
MODEL = SOURCES / "model"


def cxx_sources() -> dict[Path, str]:
    return {p: p.read_text() for p in sorted(SOURCES.rglob("*"))
            if p.suffix in (".cc", ".h") and p != schema_files.HEADER}


# --- the generated files ---


@pytest.mark.parametrize("path", [schema_files.HEADER, schema_files.DOC, schema_files.TYPED], ids=lambda p: p.name)
def test_the_generated_files_are_what_the_schema_gives(path):
    assert path.read_text() == schema_files.generated()[path], (
        f"{path} differs from gradswitch/sim/sim_schema.py: run `python -m gradswitch.sim.schema_files --write`")


def test_the_formats_are_the_schemas():
    assert FORMAT == CONFIG.format == sim_schema.CONFIG_FORMAT
    assert RESULTS_FORMAT == RESULTS.format == sim_schema.RESULTS_FORMAT
    header = schema_files.HEADER.read_text()
    assert f"constexpr uint32_t CONFIG_FORMAT = {FORMAT};" in header
    assert f"constexpr uint32_t RESULTS_FORMAT = {RESULTS_FORMAT};" in header
    sources = cxx_sources()
    assert not any(re.search(r"constexpr\s+\w+\s+(CONFIG|RESULTS)_FORMAT", t) for t in sources.values())
    assert "out[res::results::kFormat] = RESULTS_FORMAT;" in sources[MODEL / "gs-simulation.cc"]


def test_the_schema_is_well_formed():
    for schema in sim_schema.DOCUMENTS:
        ids = [s.id for s in schema.sections]
        assert len(ids) == len(set(ids)), schema.name
        for section, key in sim_schema.walk(schema):
            where = f"{schema.name}::{section.id}::{key.name}"
            assert key.type in sim_schema.TYPES, where
            assert [k.name for k in section.keys].count(key.name) == 1, where
            assert len({k.constant for k in section.keys}) == len(section.keys), where
            if key.type in ("object", "objects"):
                schema.section(key.of)
            if key.type == "map":
                assert key.of in sim_schema.TYPES or schema.section(key.of), where
            assert (key.type == "choice") == bool(key.choices), where
            if key.kinds:
                assert set(key.kinds) <= set(section.key("kind").choices), where
        reached = {schema.top.id} | {k.of for _, k in sim_schema.walk(schema) if k.of and k.of not in sim_schema.TYPES}
        assert reached == set(ids), f"{schema.name}: sections no key leads to: {set(ids) - reached}"


# --- the C++: every key through gs-keys.h, of the schema's type ---

# A string literal where a key goes: a ConfigObject's accessor's argument, a JSON subscript, the first of a pair in
# a JSON initializer ({"key", value}; a Choice's {"value", Enum::X} entries are values, not keys, and so are the
# names of an array's initializer, `= {"a", "b"}`), an argument of
# a json::contains and erase. A key is lower case, digits and underscores (a drop reason's or a NetReduce event's name,
# "queue-full", is a name of the switch program's counters: a map's entry, not a key of the format).
LITERAL = r'"([a-z][a-z0-9_]*)"'
ACCESSOR = re.compile(r'(?:\.|->)(?:Get<[^()]*?>|Need|Has|Section|Object|Objects|OptionalObjects|Map|Nullable<[^()]*?>|'
                      r'Choice<[^()]*?>|Where|contains|erase|at|value)\(\s*' + LITERAL)
SUBSCRIPT = re.compile(r'(?<!\bdrops)(?<!\bevents)\[\s*' + LITERAL + r'\s*\]')
INITIALIZER = re.compile(r'(?<!= )\{\s*' + LITERAL + r'\s*,(?!\s*[A-Z]\w*::\w+\s*\}|\s*"ns3::)')
def test_the_cxx_names_no_key_by_a_literal():
    found = []
    for path, text in cxx_sources().items():
        for line in text.splitlines():
            code = line.split("//")[0]
            found += [f"{path.name}: {line.strip()}" for pattern in (ACCESSOR, SUBSCRIPT, INITIALIZER)
                      if pattern.search(code)]
    assert not found, "keys by literal (use gs-keys.h's constants):\n" + "\n".join(found)


CONSTANT = re.compile(r"\b(cfg|res|tab|consts)::(\w+)::(k\w+)\b")
SCHEMAS = {schema.name: schema for schema in sim_schema.DOCUMENTS}


def _constants_used() -> dict[tuple[str, str, str], list[str]]:
    used: dict[tuple[str, str, str], list[str]] = {}
    for path, text in cxx_sources().items():
        for m in CONSTANT.finditer(text):
            used.setdefault((m.group(1), m.group(2), m.group(3)), []).append(path.name)
    return used


def _key(doc: str, section: str, constant: str) -> sim_schema.Key:
    schema = SCHEMAS[doc]
    matches = [k for k in schema.section(section).keys if k.constant == constant]
    assert matches, f"{doc}::{section}::{constant} is no key of the schema"
    return matches[0]


def test_the_cxx_reads_and_writes_every_key_of_the_schema_and_no_other():
    used = _constants_used()
    for doc, section, constant in used:
        _key(doc, section, constant)
    for schema in sim_schema.DOCUMENTS:
        unused = [f"{schema.name}::{s.id}::{k.constant}" for s, k in sim_schema.walk(schema)
                  if (schema.name, s.id, k.constant) not in used]
        assert not unused, f"keys of the schema the C++ never names: {unused}"


# A configuration accessor's C++ type -> the schema's type of the key it reads.
CXX_TYPES = {"uint32_t": "uint", "uint64_t": "uint", "int64_t": "int", "double": "number", "bool": "bool",
             "std::string": "string", "std::vector<uint32_t>": "uints", "std::vector<uint64_t>": "uints",
             "std::vector<int64_t>": "ints", "std::vector<std::string>": "strings"}
READ = re.compile(r"(?:\.|->)(Get|Nullable|Choice|Object|Section|Objects|OptionalObjects|Map)(?:<([^()]*?)>)?\(\s*"
                  r"cfg::(\w+)::(k\w+)\s*[,)]")


def test_the_cxx_reads_each_key_of_the_configuration_as_the_schema_types_it():
    wrong = []
    reads = 0
    for path, text in cxx_sources().items():
        for m in READ.finditer(text):
            how, cxx, section, constant = m.groups()
            key = _key("cfg", section, constant)
            reads += 1
            where = f"{path.name}: {m.group(0)}"
            if how in ("Get", "Nullable"):
                if CXX_TYPES.get(cxx or "") != key.type:
                    wrong.append(f"{where}: the schema's {key.name} is {key.type}")
                if (how == "Nullable") != key.nullable:
                    wrong.append(f"{where}: the schema's {key.name} is {'' if key.nullable else 'not '}nullable")
            else:
                expected = {"Choice": "choice", "Object": "object", "Section": "object", "Objects": "objects",
                            "OptionalObjects": "objects", "Map": "map"}[how]
                if key.type != expected:
                    wrong.append(f"{where}: the schema's {key.name} is {key.type}")
                if how in ("Section", "OptionalObjects", "Object", "Objects") and (
                        how in ("Section", "OptionalObjects")) != key.optional:
                    wrong.append(f"{where}: the schema's {key.name} is {'' if key.optional else 'not '}optional")
    assert reads > 150 and not wrong, "\n".join(wrong)


CHOICE = re.compile(r"\.Choice<[^()]*?>\(\s*cfg::(\w+)::(k\w+)\s*,\s*\{(.*?)\}\s*\);", re.S)
# a choice whose names are a table built once (a reader called per graph node): the table is the nearest before it
CHOICE_OF_TABLE = re.compile(r"\.Choice<[^()]*?>\(\s*cfg::(\w+)::(k\w+)\s*,\s*(\w+)\s*\);")
TABLE = re.compile(r"static const std::map<std::string, \w+> (\w+) = \{(.*?)\};", re.S)


def test_the_cxx_takes_each_choice_the_schema_lists():
    seen = 0
    for text in cxx_sources().values():
        found = [(m.group(1), m.group(2), m.group(3)) for m in CHOICE.finditer(text)]
        for m in CHOICE_OF_TABLE.finditer(text):
            tables = [t for t in TABLE.finditer(text) if t.group(1) == m.group(3) and t.end() < m.start()]
            assert tables, f"Choice of cfg::{m.group(1)}::{m.group(2)} names {m.group(3)}: no such table before it"
            found.append((m.group(1), m.group(2), tables[-1].group(2)))
        for section, name, table in found:
            key = _key("cfg", section, name)
            values = re.findall(r'\{\s*"([^"]+)"\s*,', table)
            assert sorted(values) == sorted(key.choices), (key.name, values, key.choices)
            seen += 1
    assert seen == sum(1 for _, k in sim_schema.walk(CONFIG) if k.type == "choice")


# --- what Python writes ---


def _ok(doc: dict[str, Any], schema: Document = CONFIG) -> dict[str, Any]:
    found = problems(doc, schema)
    assert not found, "\n".join(found)
    return doc


def _spec_config(spec: ExperimentSpec, settings: SimSettings | None = None, **job: Any) -> dict[str, Any]:
    plan = plan_run(spec)
    jobs = [replace(cfg, **job) for cfg in plan.jobs]
    return run_config(plan.topology, jobs, settings or plan.sim_settings(False))


RUNS = {
    "ring": ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=1 << 20, iterations=2),
    "ps-training-tensorlights-background": ExperimentSpec.of(
        algo=Algorithm.PS, workers=2, workload="resnet50", scale=0.002, bw_mbps=20, iterations=2,
        emulate=Emulation(link_gbps=10, device=Device.V100, batch=32), jobs=2, colocate_servers=True,
        tensorlights=True, tensorlights_rotate_s=0.01, background_flows=2, loss_pct=1.0),
    "netreduce-leafspine": ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=4, topo=Topo.LEAFSPINE, iterations=2,
                                             size_bytes=1 << 20),
    "dlcp": ExperimentSpec.of(algo=Algorithm.RING, workers=4, workload="resnet50", scale=0.002, iterations=2,
                              dlcp=DlcpOptions(priority=True, drop=True, spray=True)),
    "faults": ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=4, topo=Topo.LEAFSPINE, iterations=4,
                                faults=tuple(parse_fault(f) for f in (
                                 "switch-crash:spine1@0.5,restart=1", "switch-hang:spine2@0.2",
                                 "link-flap:leaf1-spine1@0.1", "worker-crash:1@0.2",
                                 "slow-worker:0@0,factor=2,rate=5", "slow-worker:2@0,factor=3")),
                                size_bytes=1 << 20),
}


@pytest.mark.parametrize("name", RUNS)
def test_what_python_writes_for_a_run_is_the_schema(name):
    _ok(_spec_config(RUNS[name]))


def test_every_optional_section_of_a_job_and_the_run_is_the_schema():
    doc = _spec_config(RUNS["ps-training-tensorlights-background"], crash=Crash(1, 0), dlcp=DlcpPolicy(drop=True))
    assert {"loss", "background", "tensorlights"} <= set(doc) and {"training", "crash", "dlcp"} <= set(doc["jobs"][0])
    _ok(doc)
    ring = _spec_config(RUNS["ring"])
    assert "reductions" in ring["jobs"][0]
    faults = _spec_config(RUNS["faults"])["fault_schedule"]["faults"]
    assert {f["kind"] for f in faults} == set(CONFIG.section("fault").key("kind").choices)
    assert any(f.get("rate_bps") is None and f["kind"] == "slow-worker" for f in faults)


def test_an_mpi_partition_is_the_schema():
    spec = ExperimentSpec.of(algo=Algorithm.RING, workers=8, topo=Topo.FATTREE, iterations=2, size_bytes=1 << 20)
    plan = plan_run(spec)
    doc = _spec_config(spec)
    for sync in MpiSync:
        doc["mpi"] = partition(plan.topology, list(plan.jobs), 2).config(sync)
        _ok(doc)


def _graph() -> JobGraph:
    groups = (world_group(3), ProcessGroup("pair", (2, 0)))
    r0 = (ComputeNode(5, "fwd", 0.25), CollectiveNode(6, "ag", CollectiveKind.ALL_GATHER, "pair", 4096, (5,)),
          CollectiveNode(7, "bc", CollectiveKind.BROADCAST, "world", 4096, (6,), root=2),
          CollectiveNode(8, "ar", CollectiveKind.ALL_REDUCE, "world", 1 << 16, (7,)),
          SendNode(9, "s", 1, 3, 100, (8,)))
    r1 = (CollectiveNode(0, "bc", CollectiveKind.BROADCAST, "world", 4096, (), root=2),
          CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 1 << 16, (0,)),
          RecvNode(2, "r", 0, 3, 100, (1,)))
    r2 = (CollectiveNode(0, "ag", CollectiveKind.ALL_GATHER, "pair", 4096),
          CollectiveNode(1, "bc", CollectiveKind.BROADCAST, "world", 4096, root=2),
          CollectiveNode(2, "ar", CollectiveKind.ALL_REDUCE, "world", 1 << 16, (1,)))
    return JobGraph("g", (RankGraph(0, r0), RankGraph(1, r1), RankGraph(2, r2)), groups)


def _one(kind: CollectiveKind, ranks: int = 4) -> JobGraph:
    nodes = tuple(RankGraph(r, (CollectiveNode(0, str(kind), kind, "world", 1 << 16),)) for r in range(ranks))
    return JobGraph(f"{kind}", nodes, (world_group(ranks),))


def test_a_graph_job_is_the_schema():
    topo = rack(4)
    doc, _ = config(_graph(), topo, SimSettings())
    assert doc["jobs"][0]["algo"] == "graph" and "netreduce" not in doc["jobs"][0]["graph"]
    _ok(doc)
    kinds = {n["kind"] for r in doc["jobs"][0]["graph"]["ranks"] for n in r["nodes"]}
    assert kinds == set(CONFIG.section("graph_node").key("kind").choices)


def test_a_graph_job_in_the_network_with_dlcp_and_faults_is_the_schema():
    topo = rack(4)
    transport = GraphTransport(mtu=NETREDUCE_MTU, window=64)
    for kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER):
        graph = _one(kind)
        job = job_config(graph, placement(graph, topo), topo, transport)
        settings = SimSettings(gather_placeholders=True, faults=(parse_fault("switch-crash:s1@0.5,restart=1"),))
        doc, _ = config(graph, topo, settings, job=replace(job, dlcp=DlcpPolicy()), in_network={kind: 2})
        assert "netreduce" in doc["jobs"][0]["graph"] and "dlcp" in doc["jobs"][0]
        _ok(doc)


# --- the checker itself ---


def test_the_checker_finds_what_does_not_belong():
    doc = _spec_config(RUNS["ring"])
    doc["seeed"] = 1
    doc["jobs"][0]["transport"]["mtu"] = "4096"
    del doc["switch"]["flowlet_gap_s"]
    doc["jobs"][0]["algo"] = "allreduce"
    doc["format"] = FORMAT + 1
    found = problems(doc, CONFIG)
    assert "the document: unknown key 'seeed' (section run)" in found
    assert "jobs[0].transport.mtu = '4096': an integer of at least 0" in found
    assert "switch.flowlet_gap_s is missing" in found
    assert "jobs[0].algo = 'allreduce': not one of ring, ps, netreduce, write, graph" in found
    assert f"format = {FORMAT + 1}: the schema's is {FORMAT}" in found
    faulty = _spec_config(RUNS["faults"])
    fault = next(f for f in faulty["fault_schedule"]["faults"] if f["kind"] == "link-down")
    fault["switch"] = "spine1"
    del fault["windows"]
    found = problems(faulty, CONFIG)
    assert any(p.endswith(".switch: only with kind switch-crash or switch-hang") for p in found), found
    assert any(p.endswith(".windows is missing") for p in found), found


# --- docs/simulator.md's sketches of both documents name keys of the schema only ---

# names in the sketches that are a map's entries, not keys: the requester's and responder's counters (gs-qp.h
# kCounterNames) and the NetReduce events of a switch (the switch program's counter names)
COUNTER_NAMES = {"sent", "retransmitted", "accepted", "contribution", "completion"}


@pytest.mark.parametrize(("heading", "schema"), [("## Configuration", CONFIG), ("## Results", RESULTS)])
def test_the_sketches_in_docs_simulator_md_name_keys_of_the_schema(heading, schema):
    text = (schema_files.DOC.parent / "simulator.md").read_text()
    section = text[text.index(heading):]
    sketch = section[section.index("```\n{") + 4:]
    sketch = sketch[:sketch.index("```")]
    names = set(re.findall(r'"([a-z_]+)":', sketch)) - COUNTER_NAMES
    keys = {k.name for _, k in sim_schema.walk(schema)}
    assert len(names) > 40 and names <= keys, sorted(names - keys)


# --- what Python reads of the results ---

READERS = ("results.py", "faults.py", "graph_run.py", "run.py")  # gradswitch/sim's modules that read sim-results.json


def _keys_read(path: Path) -> list[tuple[int, str]]:
    """Every string key the module reads: a subscript that loads (d["key"], not d["key"] = ...) and d.get("key")."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)):
            out.append((node.lineno, node.slice.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def test_python_reads_only_keys_of_the_results():
    keys = {k.name for _, k in sim_schema.walk(RESULTS)}
    folder = Path(sim_schema.__file__).resolve().parent
    read = {f: _keys_read(folder / f) for f in READERS}
    assert sum(len(r) for r in read.values()) > 80
    unknown = [f"{f}:{line}: {key!r}" for f, r in read.items() for line, key in r if key not in keys]
    assert not unknown, "keys read that are no key of sim_schema.RESULTS:\n" + "\n".join(unknown)
