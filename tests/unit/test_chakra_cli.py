"""`gradswitch export-et` and `gradswitch check-et` through the command line: what they write reads
back, what they print, and bad input refused in one `error:` line (exit status 2)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gradswitch.workload.chakra import read_traces, schema
from gradswitch.workload.chakra.framing import frame
from gradswitch.workload.graph import CollectiveKind

REPO_ROOT = Path(__file__).resolve().parents[2]
GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


def refused(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_export_a_collective_and_check_it(tmp_path):
    out = tmp_path / "traces" / "ag"
    result = run("export-et", "--collective", "all_gather", "--size", "64MiB", "--workers", 8, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"wrote 8 trace files {out}.0.et .. {out}.7.et"
    graph = read_traces(out)
    assert [(n.collective, n.nbytes) for _, n in graph.collectives()] == [(CollectiveKind.ALL_GATHER, 64 << 20)] * 8
    check = run("check-et", out)
    assert check.returncode == 0, check.stderr
    assert check.stdout.splitlines() == [
        "ag: 8 ranks, 1-1 nodes per rank",
        "nodes (all ranks): compute 0, collective 8, send 0, recv 0",
        "computation per rank: 0-0 s",
        "collectives (all ranks): type, nodes, bytes (Chakra's comm_size: input buffer; all_gather: own shard)",
        "  all_gather           8   512.0 MiB  (sizes 64.0 MiB to 64.0 MiB)",
        "process groups: world (ranks 0-7): 8 collective nodes"]


def test_export_send_recv_repeated(tmp_path):
    result = run("export-et", "--collective", "send_recv", "--size", "1MiB", "--workers", 4, "--repeat", 3,
                 "--compute-us", 50, "--out", tmp_path / "p2p")
    assert result.returncode == 0, result.stderr
    assert "send/recv: 12 sends, 12.0 MiB" in result.stdout
    graph = read_traces(tmp_path / "p2p")
    assert [len(r.nodes) for r in graph.ranks] == [8] * 4  # 3 x (send, recv) + 2 computations


def test_export_a_training_job_and_check_it(tmp_path):
    out = tmp_path / "rn"
    result = run("export-et", "--workload", "resnet50", "--workers", 8, "--iterations", 2, "--out", out)
    assert result.returncode == 0, result.stderr
    check = run("check-et", out)
    assert check.returncode == 0, check.stderr
    assert check.stdout.splitlines()[0] == "rn: 8 ranks, 436-436 nodes per rank"
    assert "  all_reduce          64     1.5 GiB" in check.stdout  # 8 ranks x 2 iterations x 4 buckets, 97.5 MiB each
    # each bucket's all-reduce in its DLCP layer class (its front-most tensor's), written and read back
    classes = Counter(n.layer_class for _, n in read_traces(out).collectives())
    assert len(classes) > 1
    assert ("DLCP layer classes (all ranks; 0: the top priority, docs/dlcp.md): "
            + ", ".join(f"{c}: {classes[c]}" for c in sorted(classes))) in check.stdout.splitlines()


@pytest.mark.parametrize("in_flight", [1, 2])
def test_export_a_training_job_with_its_all_reduces_in_flight(tmp_path, in_flight):
    """--in-flight W: an iteration's all-reduce k waits for all-reduces k - 2W + 1 .. k - W (the earlier ones are
    their dependencies; none after k - W: those may still run), as the training loop starts them."""
    out = tmp_path / "vgg"
    result = run("export-et", "--workload", "vgg16", "--workers", 2, "--scheduling", "priority", "--in-flight",
                 in_flight, "--out", out)
    assert result.returncode == 0, result.stderr
    nodes = read_traces(out).ranks[0].nodes
    ops = [n for n in nodes if n.name.startswith("it0.allreduce.")]
    assert len(ops) > 4
    for k, op in enumerate(ops):
        earlier = {o.id for o in ops[:k]}
        waits = {o.id for o in ops[max(0, k - 2 * in_flight + 1):max(0, k - in_flight + 1)]}
        assert earlier & set(op.deps) == waits, op.name


def test_export_the_digits_graph(tmp_path):
    """train-digits' graph (gradswitch.workload.generators.digits_graph) as a trace: the sizes and order alone, read
    back as the generator makes it."""
    from gradswitch.workload.generators import digits_graph

    out = tmp_path / "digits"
    result = run("export-et", "--workload", "train-digits", "--workers", 4, "--iterations", 3, "--out", out)
    assert result.returncode == 0, result.stderr
    back = read_traces(out)
    made = digits_graph(4, 3, name="digits")
    assert [[(type(n).__name__, n.name, n.deps) for n in r.nodes] for r in back.ranks] == \
        [[(type(n).__name__, n.name, n.deps) for n in r.nodes] for r in made.ranks]
    assert [n.nbytes for _, n in back.collectives()] == [n.nbytes for _, n in made.collectives()]


def test_check_names_a_missing_ranks_file(tmp_path):
    assert run("export-et", "--collective", "all_reduce", "--workers", 4, "--size", "4KiB",
               "--out", tmp_path / "t").returncode == 0
    (tmp_path / "t.1.et").unlink()
    assert refused(run("check-et", tmp_path / "t")) == (
        f"error: {tmp_path}/t.1.et: missing (files of ranks 0, 2-3 are there; a trace has one file per rank, 0..N-1)")


def test_check_names_a_cycle(tmp_path):
    nodes = [schema.Node(id=1, name="a", type=schema.NODE_TYPES["COMP_NODE"], data_deps=[2]),
             schema.Node(id=2, name="b", type=schema.NODE_TYPES["COMP_NODE"], data_deps=[1])]
    (tmp_path / "c.0.et").write_bytes(frame([schema.GlobalMetadata(version="1.0.0").SerializeToString(),
                                             *(n.SerializeToString() for n in nodes)]))
    assert refused(run("check-et", tmp_path / "c")) == (
        f"error: {tmp_path}/c.0.et: node 1 (a): its dependencies form a cycle")


def test_check_says_when_every_computation_lasts_0_s(tmp_path):
    nodes = [schema.Node(id=1, name="a", type=schema.NODE_TYPES["COMP_NODE"])]
    (tmp_path / "z.0.et").write_bytes(frame([schema.GlobalMetadata(version="1.0.0").SerializeToString(),
                                             *(n.SerializeToString() for n in nodes)]))
    result = run("check-et", tmp_path / "z")
    assert result.returncode == 0 and "every computation lasts 0 s" in result.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--collective", "all_reduce", "--workers", 0], "error: 0 ranks: this workload needs at least 1"),
    (["--workers", 4], "error: give --collective KIND (one collective) or --workload MODEL (a training job) to export"),
    (["--collective", "all_reduce"], "error: give --workers N (ranks of the trace) and --out DIR/PREFIX"),
    (["--collective", "send_recv", "--workers", 1], "error: 1 ranks: this workload needs at least 2"),
    (["--workload", "resnet50", "--workers", 2, "--bucket-mb", 0], "error: --bucket-mb 0.0: give more than 0 MiB"),
    (["--workload", "resnet50", "--workers", 2, "--in-flight", 0],
     "error: --in-flight 0: give 1 to 64 all-reduces at once"),
])
def test_export_refuses_bad_values_in_one_line(tmp_path, args, says):
    out = [] if args == ["--collective", "all_reduce"] else ["--out", tmp_path / "x"]
    assert refused(run("export-et", *args, *out)).startswith(says)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("option", "value", "choice"), [
    ("--collective", "reduce", "all_to_all"),
    ("--workload", "small-cnn", "resnet50"),  # no calibrated computation to time its layers by
])
def test_export_refuses_an_unknown_choice_naming_the_choices(tmp_path, option, value, choice):
    result = run("export-et", option, value, "--workers", 2, "--out", tmp_path / "x")
    assert result.returncode == 2
    assert f"invalid choice: '{value}'" in result.stderr and choice in result.stderr
    assert not list(tmp_path.iterdir())
