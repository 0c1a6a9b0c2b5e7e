"""The NaN/Inf finder (slang_kernel.engine.finite) on every backend (`--backends`): a NaN planted in the data
of a two-kernel training step is found in the right buffer, at the right index, in the right dispatch;
`.bwd` names the input whose gradient is not finite."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.engine.finite import first_nonfinite

STEP = """
// one step of fitting y = w * x per element: the residual, then the gradient and the update
[shader("compute")][numthreads(64, 1, 1)]
void residual(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> r, uniform StructuredBuffer<float> w,
              uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> y, uniform uint n)
{ if (t.x < n) r[t.x] = w[t.x] * x[t.x] - y[t.x]; }

[shader("compute")][numthreads(64, 1, 1)]
void update(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> grad, uniform RWStructuredBuffer<float> w,
            uniform StructuredBuffer<float> r, uniform StructuredBuffer<float> x, uniform float lr, uniform uint n)
{
    if (t.x >= n) return;
    float g = r[t.x] * sqrt(x[t.x]);   // a scaled residual: NaN where x is negative
    grad[t.x] = g;
    w[t.x] = w[t.x] - lr * g;
}

[Differentiable]
float plus_inverse(float a, float b) { return a + 1.0 / b; }
"""


@pytest.fixture(scope="module")
def finite(backend_name: str, open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    with open_session(backend_name, check_finite=True) as s:
        s.run_cell(STEP, name="step")
        yield s


def _arrays(s: sk.Session, **arrays: np.ndarray) -> dict[str, Any]:
    """CUDA: CuPy arrays (the finder's reduction runs on the device); else numpy."""
    if s.backend.name == "cuda":
        import cupy

        return {k: cupy.asarray(v) for k, v in arrays.items()}
    return arrays


def test_planted_nan_found_in_the_right_buffer_and_dispatch(finite: sk.Session) -> None:
    n = 100
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    y = (3 * x).astype(np.float32)
    bad_x = x.copy()
    bad_x[37] = -1.0         # the planted value: step 3's update takes its square root
    d = _arrays(finite, w=np.ones(n, np.float32), r=np.zeros(n, np.float32), grad=np.zeros(n, np.float32),
                x=x, y=y, bad_x=bad_x)
    residual, update = finite.kernel("residual"), finite.kernel("update")
    start = finite.finite.dispatches
    with pytest.raises(sk.NonFiniteError) as info:
        for step in range(5):
            xs = d["bad_x"] if step == 2 else d["x"]
            residual(threads=n, r=d["r"], w=d["w"], x=xs, y=d["y"], n=n)
            update(threads=n, grad=d["grad"], w=d["w"], r=d["r"], x=xs, lr=0.05, n=n)
    e = info.value
    assert (e.kernel, e.buffer, e.index) == ("update", "grad", (37,))   # grad is written before w
    assert np.isnan(e.value) and e.size == n
    assert (e.dispatch - start, e.call) == (6, 3)   # the third step's second dispatch
    assert "update (checked dispatch" in str(e) and "`grad` at index 37" in str(e) and "NaN" in str(e)


def test_per_call_switch_and_clean_dispatches(finite: sk.Session) -> None:
    n = 64
    d = _arrays(finite, grad=np.zeros(n, np.float32), w=np.ones(n, np.float32), r=np.ones(n, np.float32),
                x=np.full(n, -1, np.float32))
    upd = finite.kernel("update")
    upd(threads=n, check_finite=False, grad=d["grad"], w=d["w"], r=d["r"], x=d["x"], lr=0.1, n=n)  # NaN, unchecked
    x1 = _arrays(finite, x=np.ones(n, np.float32))["x"]
    with pytest.raises(sk.NonFiniteError, match="`w` at index 0"):   # grad is finite again, w kept the NaN
        upd(threads=n, grad=d["grad"], w=d["w"], r=d["r"], x=x1, lr=0.1, n=n)
    d2 = _arrays(finite, grad=np.zeros(n, np.float32), w=np.ones(n, np.float32))
    upd(threads=n, grad=d2["grad"], w=d2["w"], r=d["r"], x=x1, lr=0.1, n=n)    # all finite: no error


def test_bwd_names_the_input_whose_gradient_is_not_finite(finite: sk.Session) -> None:
    f = finite.function("plus_inverse")
    ga, gb = f.bwd(np.float32([2, 3]), np.float32([4, 2]))
    np.testing.assert_allclose(gb, [-1 / 16, -1 / 4], rtol=1e-5)
    with pytest.raises(sk.NonFiniteError) as info:
        f.bwd(np.float32([2, 3]), np.float32([4, 0]))   # d/db of a + 1/b at b = 0 is -inf; d/da is 1
    assert info.value.gradient_of == "b" and info.value.index == (1,)
    assert "gradient of input `b`" in str(info.value)
    ga, gb = f.bwd(np.float32([2, 3]), np.float32([4, 0]), check_finite=False)
    assert np.isinf(gb[1])


def test_first_nonfinite_on_host_arrays() -> None:
    assert first_nonfinite(np.ones(4, np.float32)) is None
    assert first_nonfinite(np.arange(4)) is None                      # integers hold no NaN
    a = np.ones((3, 4), np.float32)
    a[2, 1] = np.inf
    a[2, 3] = np.nan
    assert first_nonfinite(a) == ((2, 1), np.inf, 12)
    s = np.zeros(3, np.dtype([("p", np.float32, 3), ("k", np.int32)]))
    s["p"][1, 2] = -np.inf
    assert first_nonfinite(s) == ((1,), -np.inf, 3)


def test_gradient_flow_marks_where_a_nan_starts(cpu_session: sk.Session) -> None:
    """The gradient-flow graph marks the first node whose value (else derivative) is not finite."""
    pytest.importorskip("anywidget")
    from slang_kernel.widgets import GradientFlow

    cpu_session.run_cell("""
[Differentiable]
float spread(float a, float b)
{
    float d = a - b;
    float r = sqrt(d);      // NaN where a < b
    return r * 2.0 + b;
}
[Differentiable]
float bend(float a, float b) { return a * b + sqrt(a * a); }   // finite value, infinite slope at a = 0
""", name="nan_flow")
    flow = GradientFlow.check(cpu_session.function("spread"), np.float32(1.0), np.float32(2.0))
    nf = flow.first_nonfinite
    assert nf is not None and (nf["what"], nf["kind"]) == ("value", "NaN")
    assert flow.node(nf["node"]).get("callee") == "sqrt" and "%r" in flow.node(nf["node"])["text"]
    assert flow.graph["first_nonfinite"] == nf          # what the browser marks
    ok = GradientFlow.check(cpu_session.function("spread"), np.float32(3.0), np.float32(2.0))
    assert ok.first_nonfinite is None
    slope = GradientFlow.check(cpu_session.function("bend"), np.float32(0.0), np.float32(2.0))
    nf = slope.first_nonfinite
    assert nf is not None and nf["what"] == "derivative", nf


def test_device_buffers_are_scanned_on_the_device(finite: sk.Session) -> None:
    """Vulkan device buffers (a scan kernel on their device) and CuPy arrays (a reduction): the
    finder names the buffer and index without reading the buffer back."""
    name = finite.backend.name
    if name == "cpu":
        pytest.skip("the CPU backend's arrays are host memory (scanned with numpy)")
    n = 300

    def dev(a: np.ndarray) -> Any:
        if name == "cuda":
            import cupy

            return cupy.asarray(a)
        return finite.backend.buffer(a)   # type: ignore[attr-defined]

    x = np.ones(n, np.float32)
    x[257] = -4.0
    grad, w = dev(np.zeros(n, np.float32)), dev(np.ones(n, np.float32))
    with pytest.raises(sk.NonFiniteError) as info:
        finite.kernel("update")(threads=n, grad=grad, w=w, r=dev(np.ones(n, np.float32)), x=dev(x), lr=0.1, n=n,
                                check_finite=True)
    assert (info.value.buffer, info.value.index, info.value.size) == ("grad", (257,), n)
    assert np.isnan(info.value.value)
    b = finite.backend
    assert first_nonfinite(w, b) is not None and first_nonfinite(dev(np.ones(7, np.float32)), b) is None
    assert first_nonfinite(w) is not None   # without the backend: read back and scanned on the host


def test_vulkan_scan_groups_stay_under_the_device_limit() -> None:
    """The device scan strides: its group count in x never passes Vulkan's guaranteed 65535, however
    large the buffer (one thread per float would need 65537 groups at 2^24 + 300 floats)."""
    from slang_kernel.backends.vulkan.finite import GROUP, MAX_GROUPS, scan_groups

    assert scan_groups(1) == (1, 1, 1) and scan_groups(GROUP + 1) == (2, 1, 1)
    for n in (1 << 24, (1 << 24) + 300, 1 << 30, (1 << 32) - 1):
        gx = scan_groups(n)[0]
        assert gx <= min(MAX_GROUPS, 65535) and gx * GROUP <= max(n, GROUP) + GROUP


@pytest.mark.vulkan_gpu
def test_vulkan_scan_of_a_buffer_past_the_group_limit(open_session: Callable[..., sk.Session]) -> None:
    """A float32 device buffer of 2^24 + 300 elements (65537 groups of 256 without the stride) with
    one NaN near its end: the device scan finds it. On a GPU only: lavapipe takes ~15 s for it (the
    group computation is checked everywhere by the test above)."""
    s = open_session("vulkan")
    try:
        if "llvmpipe" in s.backend.describe().lower():
            pytest.skip("needs a GPU Vulkan device (a machine with an NVIDIA GPU): 2^24 floats take ~15 s on lavapipe")
        n = (1 << 24) + 300
        a = np.zeros(n, np.float32)
        buf = s.backend.buffer(a)   # type: ignore[attr-defined]
        assert first_nonfinite(buf, s.backend) is None
        a[n - 5] = np.nan
        a[n - 2] = np.inf
        buf = s.backend.buffer(a)   # type: ignore[attr-defined]
        hit = first_nonfinite(buf, s.backend)
        assert hit is not None and hit[0] == (n - 5,) and np.isnan(hit[1]) and hit[2] == n
    finally:
        s.close()
