"""`gradswitch trace-model`: a user's PyTorch model in as Chakra execution traces.

It loads the model from the user's factory (`--model pkg.models:make_model`, or
`path/to/file.py:make_model`), trains it for a few steps under DistributedDataParallel in this
process (gradswitch/workload/pytorch/measure.py says how each layer and DDP's buckets are measured), builds the
job's execution graph at `--ranks` ranks (gradswitch/workload/pytorch/job_graph.py) and writes it as Chakra
traces, `PREFIX.{rank}.et`, with the measured profile beside them (`PREFIX.profile.json`), from which
`--from-profile` builds the graph again at another rank count without measuring (or torch).
PyTorch is an extra: `pip install 'gradswitch[pytorch]'` (or the user's own torch build).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradswitch.formats import FormatError, check_format
from gradswitch.workload.graph import GraphError, JobGraph, validate
from gradswitch.workload.pytorch.job_graph import job_graph
from gradswitch.workload.pytorch.profile import PROFILE_FORMAT, ModelProfile, ProfileError

PROFILE_SUFFIX = ".profile.json"


class TraceModelError(ValueError):
    """A bad option or factory: one line naming the value, what is allowed and what to do."""


@dataclass(frozen=True)
class Written:
    traces: list[Path]
    profile: Path
    graph: JobGraph


def load_object(ref: str, option: str) -> Any:
    """`pkg.module:name` (importable from here or the current directory) or `path/to/file.py:name`."""
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise TraceModelError(f"{option} {ref!r}: give MODULE:NAME (e.g. mypkg.models:make_model) or FILE.py:NAME")
    if module_ref.endswith(".py") or os.sep in module_ref:
        path = Path(module_ref)
        if not path.is_file():
            raise TraceModelError(f"{option} {ref!r}: no file {path}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise TraceModelError(f"{option} {ref!r}: {path} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_ref)
        except ModuleNotFoundError as e:
            raise TraceModelError(f"{option} {ref!r}: no module {e.name!r} (run from the directory that holds "
                                  "it, install its package, or give path/to/file.py:NAME)") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise TraceModelError(f"{option} {ref!r}: module {module_ref} has no {attr!r}") from None


def _call(ref: str, option: str) -> Any:
    factory = load_object(ref, option)
    if not callable(factory):
        raise TraceModelError(f"{option} {ref!r}: {type(factory).__name__} is not callable; give a function "
                              "that returns it")
    return factory()


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise TraceModelError(f"--input-shape {text!r}: give sizes separated by commas, the batch first "
                              "(e.g. 32,3,224,224)") from None
    if any(n < 1 for n in shape):
        raise TraceModelError(f"--input-shape {text!r}: every size is 1 or more (e.g. 32,3,224,224)")
    return shape


def measure(args: argparse.Namespace) -> ModelProfile:
    from gradswitch.workload.pytorch.measure import import_torch, measure_model, random_batch

    if (args.input_shape is None) == (args.batch is None):
        raise TraceModelError("give the input as one of --input-shape (e.g. 32,3,224,224) or --batch MODULE:FACTORY")
    import_torch()  # one line naming the extra before the user's code runs
    shape = parse_shape(args.input_shape) if args.input_shape is not None else None
    model = _call(args.model, "--model")
    batch = random_batch(shape) if shape is not None else _call(args.batch, "--batch")
    loss: Callable[[Any, Any], Any] | None = load_object(args.loss, "--loss") if args.loss else None
    return measure_model(model, batch, model_name=args.model.rpartition(":")[2], steps=args.steps,
                         warmup=args.warmup, device=args.device, bucket_mb=args.bucket_mb, loss=loss)


def write(profile: ModelProfile, prefix: Path, ranks: int, iterations: int, name: str | None = None) -> Written:
    """The graph at `ranks` ranks, validated, written as Chakra traces and the profile beside them."""
    graph = job_graph(profile, ranks, iterations, name)
    validate(graph)
    try:
        from gradswitch.workload.chakra import write_traces
    except ImportError:
        raise TraceModelError("writing Chakra traces needs gradswitch.workload.chakra, which this gradswitch "
                              "lacks") from None
    prefix.parent.mkdir(parents=True, exist_ok=True)
    traces = write_traces(graph, prefix)
    profile_path = prefix.parent / (prefix.name + PROFILE_SUFFIX)
    profile_path.write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
    return Written(traces, profile_path, graph)


def read_profile(path: Path) -> ModelProfile:
    """A profile trace-model wrote (ProfileError, naming it: of another format than PROFILE_FORMAT)."""
    try:
        raw = check_format(json.loads(path.read_text()), path, "trace-model profile", PROFILE_FORMAT)
    except FormatError as e:
        raise ProfileError(f"{e}; or measure the model again with `gradswitch trace-model --model ...`") from None
    except OSError as e:
        raise TraceModelError(f"--from-profile {path}: {e.strerror}") from None
    except ValueError as e:
        raise TraceModelError(f"--from-profile {path}: not a profile trace-model wrote ({type(e).__name__}: {e})") \
            from None
    try:
        return ModelProfile.from_dict(raw)
    except (ValueError, KeyError, TypeError) as e:
        if isinstance(e, ProfileError):
            raise
        raise TraceModelError(f"--from-profile {path}: not a profile trace-model wrote ({type(e).__name__}: {e})") \
            from None


def summary(profile: ModelProfile, written: Written, prefix: Path) -> str:
    fwd = sum(x.forward_s for x in profile.layers)
    bwd = sum(x.backward_s for x in profile.layers)
    sizes = ", ".join(f"{b.nbytes}" for b in profile.buckets)
    return (f"{profile.model} on {profile.device} (torch {profile.torch_version}, batch {profile.batch}, median of "
            f"{profile.steps} steps after {profile.warmup} warm-up): {len(profile.layers)} layers, forward "
            f"{fwd * 1e3:.3f} ms, backward {bwd * 1e3:.3f} ms, optimizer {profile.optimizer_s * 1e3:.3f} ms; "
            f"{len(profile.buckets)} DDP buckets of {profile.param_bytes} gradient bytes ({sizes})\n"
            f"{written.graph.world_size} ranks: {len(written.traces)} traces {prefix}.{{0..{len(written.traces) - 1}}}"
            f".et; profile {written.profile}")


def check_counts(args: argparse.Namespace) -> None:
    for option, value, least in (("--ranks", args.ranks, 1), ("--iterations", args.iterations, 1),
                                 ("--steps", args.steps, 1), ("--warmup", args.warmup, 0)):
        if value < least:
            raise TraceModelError(f"{option} {value}: give {least} or more")
    if args.bucket_mb is not None and not args.bucket_mb > 0:
        raise TraceModelError(f"--bucket-mb {args.bucket_mb}: give a positive size in MiB (DDP's default is 25)")
    if (args.model is None) == (args.from_profile is None):
        raise TraceModelError("give the model to measure (--model MODULE:FACTORY) or a profile it left "
                              "(--from-profile PREFIX.profile.json), one of them")


def cmd_trace_model(args: argparse.Namespace) -> int:
    try:
        check_counts(args)
        profile = read_profile(args.from_profile) if args.from_profile else measure(args)
        out = args.out or Path("traces") / (args.name or profile.model)
        written = write(profile, out, args.ranks, args.iterations, args.name)
    except (TraceModelError, ProfileError, GraphError) as e:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary(profile, written, out))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `gradswitch trace-model` (gradswitch/cli/main.py makes the subcommand)."""
    p.add_argument("--model", metavar="MODULE:FACTORY", help="a function returning the torch.nn.Module "
                   "(mypkg.models:make_model, importable from the current directory, or path/to/file.py:make_model)")
    p.add_argument("--input-shape", metavar="N,...", help="one rank's input: a float32 tensor of this shape, batch "
                   "first (e.g. 32,3,224,224)")
    p.add_argument("--batch", metavar="MODULE:FACTORY", help="one rank's input from a function: a tensor, a tuple "
                   "of the forward's arguments or a dict of its keyword arguments")
    p.add_argument("--loss", metavar="MODULE:FUNCTION", help="loss(output, batch) -> scalar tensor (default: the "
                   "mean square of the output)")
    p.add_argument("--out", type=Path, metavar="DIR/PREFIX", help="write PREFIX.{rank}.et (Chakra) and "
                   "PREFIX.profile.json (default traces/MODEL: the factory's name, or the job's --name)")
    p.add_argument("--ranks", type=int, default=8, help="data-parallel ranks of the job (default 8)")
    p.add_argument("--iterations", type=int, default=2, help="training iterations in the traces (default 2)")
    p.add_argument("--steps", type=int, default=5, help="steps measured, medians taken (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="steps run first and left out (default 2; DDP rebuilds "
                   "its buckets after the first)")
    p.add_argument("--device", default="auto", help="auto (CUDA where there is one), cpu, cuda or cuda:N")
    p.add_argument("--bucket-mb", type=float, help="DDP's bucket_cap_mb (default DDP's: 25, the first bucket 1)")
    p.add_argument("--name", help="the job's name in the traces (default MODEL-Nranks)")
    p.add_argument("--from-profile", type=Path, metavar="FILE", help="build the traces from a profile this command "
                   "wrote (PREFIX.profile.json) instead of measuring: another --ranks or --iterations, no torch")
    p.set_defaults(func=cmd_trace_model)


DESCRIPTION = ("Measure your PyTorch model as data-parallel training runs it and write the job as Chakra execution "
               "traces, one per rank, that `gradswitch experiment --workload-et` replays on BMv2 or ns-3. The "
               "model trains for --warmup + --steps steps under DistributedDataParallel in this process (world size "
               "1, gloo on CPU, NCCL on CUDA; CUDA where there is one): hooks time each layer's forward and "
               "backward, and a DDP communication hook sees its gradient buckets (sizes, parameters, launch order). "
               "Each rank's graph: per iteration the forwards, the backwards in reverse, an all-reduce per bucket "
               "once the backward of the last layer it holds is done, the optimizer's step after them. Needs "
               "PyTorch: pip install 'gradswitch[pytorch]'.")
EXAMPLES = ["gradswitch trace-model --model mypkg.models:make_model --input-shape 32,3,224,224 --ranks 8 "
            "--out traces/mymodel",
            "gradswitch trace-model --model model.py:build --batch model.py:example_batch --out traces/mine",
            "gradswitch trace-model --from-profile traces/mymodel.profile.json --ranks 64 --out traces/mymodel64"
            "  # again at 64 ranks, without measuring"]
