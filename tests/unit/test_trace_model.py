"""`gradswitch trace-model` without PyTorch: the job graph of a measured profile
(gradswitch/workload/pytorch/job_graph.py),
computed by hand on a small profile; the profile's file form; the command's one-line refusals."""

from __future__ import annotations

import json
import re
import sys

import pytest

from gradswitch.cli.main import main
from gradswitch.cli.trace_model import TraceModelError, load_object, parse_shape, read_profile
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, validate
from gradswitch.workload.pytorch.job_graph import job_graph
from gradswitch.workload.pytorch.profile import BucketProfile, LayerProfile, ModelProfile, ProfileError

# A 3-layer model: fc1 (1000 B of gradients), relu (none), fc2 (200 B); DDP's buckets: fc2's first, then fc1's.
PROFILE = ModelProfile(
    "tiny", "cpu", "2.13.0+cpu", 5, 2, "(4, 10) float32",
    (LayerProfile("fc1", "Linear", 0.010, 0.020, 1000), LayerProfile("relu", "ReLU", 0.001, 0.002, 0),
     LayerProfile("fc2", "Linear", 0.003, 0.006, 200)),
    (BucketProfile(0, 200, ("fc2.bias", "fc2.weight"), "fc2"), BucketProfile(1, 1000, ("fc1.bias", "fc1.weight"),
                                                                              "fc1")),
    0.0005)


def test_each_iteration_is_forwards_backwards_in_reverse_an_all_reduce_per_bucket_and_the_optimizer():
    graph = job_graph(PROFILE, ranks=4, iterations=2)
    validate(graph)
    assert graph.world_size == 4 and [g.ranks for g in graph.groups] == [(0, 1, 2, 3)]
    assert all(r.nodes == graph.ranks[0].nodes for r in graph.ranks)
    nodes = graph.ranks[0].nodes
    assert [n.name for n in nodes[:8]] == [
        "it0.fwd.fc1", "it0.fwd.relu", "it0.fwd.fc2", "it0.bwd.fc2", "it0.bwd.relu", "it0.bwd.fc1",
        "it0.allreduce.0", "it0.allreduce.1"]
    assert [n.id for n in nodes] == list(range(18))  # 2 x (3 forwards + 3 backwards + 2 all-reduces + 1 step)
    by_name = {n.name: n for n in nodes}
    # the chain of computation, each backward after the one before it
    assert by_name["it0.fwd.fc1"].deps == ()
    assert by_name["it0.bwd.fc2"].deps == (by_name["it0.fwd.fc2"].id,)
    assert by_name["it0.bwd.fc1"].deps == (by_name["it0.bwd.relu"].id,)
    # each bucket's all-reduce once the backward of the last layer whose gradients it holds is done
    b0, b1 = by_name["it0.allreduce.0"], by_name["it0.allreduce.1"]
    assert isinstance(b0, CollectiveNode) and isinstance(b1, CollectiveNode)
    assert (b0.collective, b0.group, b0.nbytes, b0.deps) == (CollectiveKind.ALL_REDUCE, "world", 200,
                                                             (by_name["it0.bwd.fc2"].id,))
    assert (b1.nbytes, b1.deps) == (1000, (by_name["it0.bwd.fc1"].id,))
    # the optimizer after the last backward and every all-reduce; the next forward after the optimizer
    step = by_name["it0.optimizer"]
    assert isinstance(step, ComputeNode) and step.duration_s == 0.0005
    assert step.deps == (by_name["it0.bwd.fc1"].id, b0.id, b1.id)
    assert by_name["it1.fwd.fc1"].deps == (step.id,)
    times = {n.name: n.duration_s for n in nodes if isinstance(n, ComputeNode)}
    assert (times["it1.fwd.fc1"], times["it1.bwd.relu"]) == (0.010, 0.002)
    assert sum(n.nbytes for n in nodes if isinstance(n, CollectiveNode)) == 2 * PROFILE.param_bytes == 2400


def test_bad_counts_and_profiles_are_one_line():
    with pytest.raises(ProfileError, match=r"^ranks 0: a job has 1 rank or more"):
        job_graph(PROFILE, ranks=0)
    with pytest.raises(ProfileError, match=r"^iterations 0: "):
        job_graph(PROFILE, ranks=2, iterations=0)
    lost = ModelProfile(**{**PROFILE.__dict__, "buckets": (BucketProfile(0, 8, ("x",), "fc9"),)})
    with pytest.raises(ProfileError, match=r"bucket 0 is ready after layer 'fc9', which is not one of"):
        job_graph(lost, ranks=2)


def test_the_profile_file_round_trips_and_another_format_is_refused(tmp_path):
    assert ModelProfile.from_dict(json.loads(json.dumps(PROFILE.to_dict()))) == PROFILE
    path = tmp_path / "p.profile.json"
    path.write_text(json.dumps({**PROFILE.to_dict(), "format": 99}))
    with pytest.raises(ProfileError, match=re.escape(f"{path}: a trace-model profile of format 99; this gradswitch "
                                                     "reads format 1")):
        read_profile(path)
    path.write_text(json.dumps({"format": 1, "model": "m"}))
    with pytest.raises(TraceModelError, match=r"not a profile trace-model wrote"):
        read_profile(path)


def test_factories_load_from_a_module_or_a_file_and_a_bad_one_is_named(tmp_path):
    assert load_object("json:dumps", "--model") is json.dumps
    (tmp_path / "mine.py").write_text("def make():\n    return 42\n")
    assert load_object(f"{tmp_path / 'mine.py'}:make", "--model")() == 42
    with pytest.raises(TraceModelError, match=r"^--model 'nosuchpkg.models:make': no module 'nosuchpkg'"):
        load_object("nosuchpkg.models:make", "--model")
    with pytest.raises(TraceModelError, match=r"^--model 'json:nothing': module json has no 'nothing'$"):
        load_object("json:nothing", "--model")
    with pytest.raises(TraceModelError, match=r"give MODULE:NAME"):
        load_object("json", "--model")
    assert parse_shape("32,3,224,224") == (32, 3, 224, 224)
    with pytest.raises(TraceModelError, match=r"^--input-shape '32,0': every size is 1 or more"):
        parse_shape("32,0")


@pytest.mark.parametrize(("argv", "message"), [
    (["--ranks", "0", "--from-profile", "p.json"], "error: --ranks 0: give 1 or more"),
    (["--bucket-mb", "0", "--from-profile", "p.json"], "error: --bucket-mb 0.0: give a positive size"),
    ([], "error: give the model to measure (--model MODULE:FACTORY) or a profile"),
    (["--model", "m:f"], "error: give the input as one of --input-shape"),
])
def test_the_command_refuses_bad_options_in_one_line(tmp_path, capsys, argv, message):
    assert main(["trace-model", "--out", str(tmp_path / "x"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_without_torch_the_command_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert main(["trace-model", "--model", "m:f", "--input-shape", "2,3", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "needs PyTorch" in err and "pip install 'gradswitch[pytorch]'" in err and err.count("\n") == 1
