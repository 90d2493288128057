"""float32 through int32 sums: the fixed scale and the shared block exponent (gradswitch/workload/floats.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradswitch.workload.encoding import Encoder, job_profile
from gradswitch.workload.floats import BLOCK, BlockExponent, FixedPoint
from gradswitch.workload.job import Algorithm, DType, FloatMode, JobConfig, Node, Role


def test_block_is_one_netreduce_packet():
    """A shared exponent covers what the switch adds in one packet: the compiled program's aggregation
    payload header (p4c's JSON, not config.p4's constant, which BLOCK is defined from) holds BLOCK int32."""
    import json

    from gradswitch.protocol.paths import BMV2_JSON

    header = next(h for h in json.loads(BMV2_JSON.read_text())["header_types"] if h["name"] == "agg_payload_h")
    assert sum(width for _, width, *_ in header["fields"]) == BLOCK * 32


def _workers_blocks(seed: int, workers: int, blocks: int, spread: int) -> list[np.ndarray]:
    """Gradients whose blocks span many binades (spread), so one global scale cannot serve them all."""
    rng = np.random.default_rng(seed)
    scales = np.ldexp(1.0, rng.integers(-spread, 3, size=blocks))
    return [(rng.normal(size=(blocks, BLOCK)) * scales[:, None]).ravel() for _ in range(workers)]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 32), blocks=st.integers(1, 6),
       spread=st.integers(0, 20))
def test_shared_exponent_bounds_every_block_and_never_overflows(seed, workers, blocks, spread):
    codec = BlockExponent(workers)
    xs = _workers_blocks(seed, workers, blocks, spread)
    code_sum = np.sum([codec.codes(x).astype(np.int64) for x in xs], axis=0)
    assert code_sum.max() < 2**31  # the codes' own sum fits in int32
    exps = codec.exponents(code_sum.astype(np.int32))
    peaks = np.max(np.abs(np.stack(xs).reshape(workers, blocks, BLOCK)), axis=(0, 2))
    assert np.all(peaks < np.ldexp(1.0, exps))  # every worker's block is below 2**E
    assert np.all(np.ldexp(1.0, exps) <= np.maximum(peaks, 2.0**codec.floor) * 2 * workers)  # and E is tight
    ints = [codec.encode(x, exps) for x in xs]
    assert all(sat == 0 for _, sat in ints)
    total = np.sum([i.astype(np.int64) for i, _ in ints], axis=0)
    assert np.abs(total).max() < 2**31  # the values' sum fits in int32
    error = np.abs(codec.decode(total.astype(np.int32), exps) - np.sum(xs, axis=0))
    assert np.all(error <= codec.error_bound(exps, len(total)) * (1 + 1e-9))


def test_exponent_keeps_small_blocks_precise_where_a_fixed_scale_loses_them():
    xs = _workers_blocks(3, 4, 8, 18)  # blocks from 2**-18 to 2**2
    fixed, block = FixedPoint(20, 4), BlockExponent(4)
    reference = np.sum(xs, axis=0)
    fixed_err = np.abs(fixed.decode(np.sum([fixed.encode(x)[0] for x in xs], axis=0)) - reference)
    code_sum = np.sum([block.codes(x) for x in xs], axis=0).astype(np.int32)
    exps = block.exponents(code_sum)
    block_err = np.abs(block.decode(np.sum([block.encode(x, exps)[0] for x in xs], axis=0), exps) - reference)
    relative = lambda err: float(np.max(err / np.maximum(np.abs(reference), 1e-30)))  # noqa: E731
    small = np.repeat(np.max(np.abs(np.stack(xs)), axis=(0,)).reshape(8, BLOCK).max(axis=1) < 2**-12, BLOCK)
    assert small.any()
    assert np.median(block_err[small] / np.abs(reference[small])) < 1e-6
    assert np.median(fixed_err[small] / np.abs(reference[small])) > 1e-3  # the fixed scale rounds them away
    assert relative(block_err) < relative(fixed_err)


def test_a_block_above_the_window_saturates_and_is_counted():
    codec = BlockExponent(4, floor=-24)
    x = np.full(BLOCK, 2.0 ** (codec.floor + codec.window + 3))
    exps = codec.exponents(np.sum([codec.codes(x)] * 4, axis=0).astype(np.int32))
    _, saturated = codec.encode(x, exps)
    assert saturated == BLOCK


def test_exponent_mode_adds_one_code_tensor_per_tensor():
    nodes = tuple(Node(i, Role.WORKER, f"h{i}", f"10.0.0.{i + 1}") for i in range(4))
    cfg = JobConfig(Algorithm.RING, nodes, workload="small-cnn", scale=0.01, dtype=DType.FLOAT32,
                    float_mode=FloatMode.EXPONENT)
    base = job_profile(JobConfig(Algorithm.RING, nodes, workload="small-cnn", scale=0.01, dtype=DType.FLOAT32))
    profile = job_profile(cfg)
    assert len(profile.tensors) == 2 * len(base.tensors)
    for j, t in enumerate(base.tensors):
        codes, values = profile.tensors[2 * j], profile.tensors[2 * j + 1]
        assert values == t and codes.kind == "exponents" and codes.elements == -(-t.elements // BLOCK)
        assert Encoder(cfg).index(j) == 2 * j + 1


def test_a_wrong_code_sum_is_a_wrong_result():
    nodes = tuple(Node(i, Role.WORKER, f"h{i}", f"10.0.0.{i + 1}") for i in range(3))
    enc = Encoder(JobConfig(Algorithm.RING, nodes, dtype=DType.FLOAT32, float_mode=FloatMode.EXPONENT))
    want, reference = enc.expected(300, [0, 1, 2], 0, 0)
    assert enc.check(want, want, reference).correct
    assert want.codes is not None
    bad = type(want)(want.total, want.codes + 1, want.exponents)
    assert not enc.check(bad, want, reference).correct
