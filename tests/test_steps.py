"""slang_kernel.steps.Step: launches bound once and replayed, on every backend (`session` fixture:
cpu, vulkan on lavapipe, cuda on the GPU machine), checked against numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.steps import Step

CELL = """
RWStructuredBuffer<float> acc;      // a global, as the training notebooks' parameters

[shader("compute")]
[numthreads(64, 1, 1)]
void addScaled(uint3 tid : SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform float a, uniform uint n)
{
    if (tid.x < n) acc[tid.x] += a * x[tid.x];
}

[shader("compute")]
[numthreads(64, 1, 1)]
void halve(uint3 tid : SV_DispatchThreadID, uniform uint n)
{
    if (tid.x < n) acc[tid.x] *= BODY_FACTOR;
}
"""


def _device(s: sk.Session, a: np.ndarray) -> Any:
    b = s.backend
    if "device_buffers" in b.capabilities:
        return b.buffer(a)
    if b.name == "cuda":
        import cupy

        return cupy.asarray(a)
    if "shared_arrays" in b.capabilities:
        return b.shared(a)
    return a


def _host(d: Any) -> np.ndarray:
    return d.numpy() if hasattr(d, "numpy") else d.get() if hasattr(d, "get") else np.array(d)


def _expected(acc: np.ndarray, x: np.ndarray, factor: float, rounds: int) -> np.ndarray:
    acc = acc.astype(np.float64)
    for _ in range(rounds):
        acc = (acc + 2.0 * x) * factor
    return acc


def test_step_replays_launches_in_order(session: sk.Session) -> None:
    _replay_check(session)


@pytest.mark.vulkan
def test_step_vulkan_in_process(cache_dir: str) -> None:
    """Session(isolate=False): the step's command buffer is recorded in this process."""
    try:
        s = sk.Session(backend="vulkan", isolate=False, cache_dir=cache_dir)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"vulkan backend unavailable: {exc}")
    try:
        _replay_check(s)
    finally:
        s.close()


def _replay_check(session: sk.Session) -> None:
    session.run_cell(CELL.replace("BODY_FACTOR", "0.5"), name="steps_cell")
    n = 1000
    rng = np.random.default_rng(1)
    x0 = rng.random(n, dtype=np.float32)
    acc0 = rng.random(n, dtype=np.float32)
    x, acc = _device(session, x0), _device(session, acc0.copy())
    step = Step([(session.kernel("addScaled"), dict(threads=n, x=x, a=2.0, n=n)),
                 (session.kernel("halve"), dict(threads=n, n=n))], shared=dict(acc=acc))
    step(3)
    step(0)
    step()
    np.testing.assert_allclose(_host(acc), _expected(acc0, x0, 0.5, 4), rtol=1e-5)
    assert step.mode

    # re-running the cell rebinds the step at its next call: the new body is what runs
    session.run_cell(CELL.replace("BODY_FACTOR", "0.25"), name="steps_cell")
    before = _host(acc).astype(np.float64)
    step(2)
    np.testing.assert_allclose(_host(acc), _expected(before, x0, 0.25, 2), rtol=1e-5)


def test_step_bad_input_is_named(session: sk.Session) -> None:
    session.run_cell(CELL.replace("BODY_FACTOR", "0.5"), name="steps_cell")
    acc = _device(session, np.zeros(8, np.float32))
    with pytest.raises(sk.ParameterError, match="missing `x`"):
        Step([(session.kernel("addScaled"), dict(threads=8, a=1.0, n=8))], shared=dict(acc=acc))(1)
    with pytest.raises(ValueError, match="non-negative"):
        Step([(session.kernel("halve"), dict(threads=8, n=8))], shared=dict(acc=acc))(-1)
    with pytest.raises(TypeError, match="ComputeKernel"):
        Step([("halve", dict(threads=8, n=8))])  # type: ignore[list-item]
    if "replay" in session.backend.capabilities:
        host = np.zeros(8, np.float32)      # a replayed step cannot copy host arrays back at every launch
        with pytest.raises(sk.ParameterError, match="`acc`|host"):
            Step([(session.kernel("halve"), dict(threads=8, n=8))], shared=dict(acc=host))(1)


OOB = """
RWStructuredBuffer<float> acc;

[shader("compute")]
[numthreads(8, 1, 1)]
void poke(uint3 tid : SV_DispatchThreadID, uniform uint n)
{
    if (tid.x < n) acc[tid.x] += 1.0;   // acc has 4 elements: threads 4..7 write out of range
}
"""


def test_checked_session_steps_check_every_launch(backend_name: str, cache_dir: str) -> None:
    """Session(checked=True): a step dispatches launch by launch, so each one is checked."""
    try:
        s = sk.Session(backend=backend_name, checked=True, cache_dir=cache_dir)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"{backend_name} backend unavailable: {exc}")
    try:
        s.run_cell(OOB, name="oob")
        acc = _device(s, np.zeros(4, np.float32))
        step = Step([(s.kernel("poke"), dict(threads=8, n=8))], shared=dict(acc=acc))
        with pytest.raises(sk.BoundsError):
            step(1)
        assert step.mode == "one dispatch per launch"
    finally:
        s.close()


def test_check_finite_session_names_the_launch_of_a_planted_nan(backend_name: str, cache_dir: str) -> None:
    """Session(check_finite=True): a step dispatches launch by launch through the NaN/Inf finder, so
    the first non-finite value is named with its buffer, index, kernel and launch."""
    try:
        s = sk.Session(backend=backend_name, check_finite=True, cache_dir=cache_dir)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"{backend_name} backend unavailable: {exc}")
    try:
        s.run_cell(CELL.replace("BODY_FACTOR", "1e10"), name="steps_cell")   # acc[37]: 1e10^k, +inf at k = 4
        n = 100
        acc0 = np.zeros(n, np.float32)
        acc0[37] = 1.0
        acc = _device(s, acc0)
        x = _device(s, np.zeros(n, np.float32))
        step = Step([(s.kernel("addScaled"), dict(threads=n, x=x, a=2.0, n=n)),
                     (s.kernel("halve"), dict(threads=n, n=n))], shared=dict(acc=acc))
        start = s.finite.dispatches
        with pytest.raises(sk.NonFiniteError) as info:
            step(10)
        e = info.value
        assert (e.kernel, e.buffer, e.index, e.size) == ("halve", "acc", (37,), n)
        assert np.isinf(e.value) and e.value > 0
        assert (e.dispatch - start, e.call) == (8, 4)     # the fourth round's second launch
        assert step.mode == "one dispatch per launch, each scanned for NaN/Inf"
        # per step: off, the same session replays (where the backend can) and finds nothing
        quiet = Step([(s.kernel("halve"), dict(threads=n, n=n))], shared=dict(acc=acc), check_finite=False)
        quiet(1)
        assert "scanned" not in quiet.mode
    finally:
        s.close()
