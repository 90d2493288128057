"""The iteration time of a 1,024-worker training job on ns-3 with its fabric intact and with one element gone:
what recovery in place costs after a link or switch fails and the routes go around it (bench/goodput.py).

Each run is the scaling study's (bench/scaling.py: ResNet-50, one emulated V100 per worker, FP32, batch 32,
DDP's 25 MB buckets, every link 100 Gb/s, a topology-aware ring on a k-ary fat tree) for ONE iteration (both
iterations of the study's runs take the same time to a microsecond: one is enough). A degraded fabric is the
same topology without the element (a link, or a switch and all its links): the simulator computes its routes and
ECMP groups from the topology it is given, i.e. the routes a controller pushes once it has rerouted around the
failure. Only elements whose loss leaves every worker connected are measured (a host's link or its edge switch
takes workers out: a spare replaces them, bench/goodput.py). Every run is kept under --out as
<label>.json (resumable: a run found there is not simulated again).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import Limits
from bench.scaling import scaling_spec
from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.report import busiest_link_load
from gradswitch.experiment.simulated import link_usage, sim_settings
from gradswitch.sim import run as simulate
from gradswitch.topology.model import Topology
from gradswitch.version import code_version
from gradswitch.workload.failure_schedule import ElementKind, without

MODEL = "resnet50"
ALGO = "ring"
BATCH = 32  # samples per GPU per iteration (the scaling study's emulated V100s)


@dataclass(frozen=True)
class FabricRun:
    """One iteration of the job on the fabric with `removed` gone (empty: intact)."""

    label: str
    removed: str  # the element taken out ("" for the intact fabric): a switch, or a link as A-B
    element: str  # its kind (ElementKind) or "intact"
    workers: int
    model: str
    algo: str
    ok: bool  # every node finished its iteration with a correct (digest-checked) sum
    iteration_s: float  # simulated seconds of the iteration (the slowest node)
    busiest_link_load: float | None
    wall_s: float  # wall seconds the simulation took on this machine
    limits: dict[str, Any]
    code_version: str = ""  # the code (and so the simulator's sources) the run was made with

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FabricRun:
        return cls(**raw)


def degraded_cases(topo: Topology) -> list[tuple[str, ElementKind | None, str]]:
    """(label, kind, element) for the intact fabric and one element of each class whose loss leaves every
    worker connected: an edge-aggregation link, an aggregation-core link, an aggregation and a core switch
    (the first of each in declaration order: a fat tree is symmetric)."""
    def first_link(role_a: str, role_b: str) -> str:
        roles = {s.name: s.role for s in topo.switches}
        lk = next(lk for lk in topo.links if roles.get(lk.a) == role_a and roles.get(lk.b) == role_b)
        return f"{lk.a}-{lk.b}"

    def first_switch(role: str) -> str:
        return next(s.name for s in topo.switches if s.role == role)

    return [("intact", None, ""),
            ("edge-agg-link", ElementKind.LINK, first_link("edge", "agg")),
            ("agg-core-link", ElementKind.LINK, first_link("agg", "core")),
            ("agg-switch", ElementKind.SWITCH, first_switch("agg")),
            ("core-switch", ElementKind.SWITCH, first_switch("core"))]


def measure(workers: int, label: str, kind: ElementKind | None, element: str, out: Path, progress: bool = False
            ) -> FabricRun:
    """One iteration on the fabric without `element` (kept in out/<label>.json; found there: not run again)."""
    path = out / f"{label}-n{workers}.json"
    if path.exists():
        return FabricRun.from_dict(json.loads(path.read_text()))
    spec = replace(scaling_spec(MODEL, workers, ALGO), iterations=1, warmup=0, name=f"goodput-{label}-n{workers}")
    spec.validate()
    assert spec.emulate is not None and spec.emulate.batch == BATCH
    intact = topology_for(spec)
    placement = place(spec, intact)
    cfgs = [job_config(spec, j + 1, nodes, intact) for j, nodes in enumerate(placement.jobs)]
    topo = without(intact, kind, element)
    started = time.monotonic()
    result = simulate(topo, cfgs, sim_settings(spec, cfgs, placement, progress), out / f"sim-{label}-n{workers}")
    wall = time.monotonic() - started
    nodes = result.nodes[cfgs[0].job_id].values()
    times = [it["time_s"] for node in nodes for it in node["iterations"]]
    correct = all(it["correct"] for node in nodes for it in node["iterations"])
    load = busiest_link_load(link_usage(topo, result))
    figures = Limits.simulated_figures(load)
    run = FabricRun(label, element, str(kind) if kind is not None else "intact", workers, MODEL, ALGO,
                    result.ok() and correct and bool(times), max(times) if times else float("nan"), load, wall,
                    figures, code_version())
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(run), indent=1) + "\n")
    return run


def measure_all(workers: int, out: Path, progress: bool = False, simulate_missing: bool = True) -> list[FabricRun]:
    """Every case's run; simulate_missing False: only those already kept under `out`."""
    spec = replace(scaling_spec(MODEL, workers, ALGO), iterations=1, warmup=0)
    runs = []
    for label, kind, element in degraded_cases(topology_for(spec)):
        if not simulate_missing and not (out / f"{label}-n{workers}.json").exists():
            print(f"ns-3: {label} ({element or 'intact'}): not measured under {out}, left out", flush=True)
            continue
        print(f"ns-3: {MODEL} {ALGO}, {workers} workers, {label} {element} ...", flush=True)
        run = measure(workers, label, kind, element, out, progress)
        print(f"  iteration {run.iteration_s * 1e3:.3f} ms, {'exact' if run.ok else 'FAILED'}, "
              f"wall {run.wall_s:.0f} s", flush=True)
        runs.append(run)
    return runs
