"""The debugging views on torch code (slang_kernel.torch.debug): gradient checks, the gradient-flow
view, the NaN finder, per-dispatch timings and a live view of tensors a training loop updates."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.views.gradients import gradient_report
from slang_kernel.torch.debug import dispatch_times
from tests.torch_support import cell_fixture, device as _device

torch = pytest.importorskip("torch")

FUNCS = """
[Differentiable] float td_mul(float x, float y) { return x * x * y; }
[Differentiable] float td_log(float x) { return log(x); }

// a custom derivative with a planted bug: d/dx x^3 is 3x^2, the backward pass says 2x^2
[BackwardDerivative(td_cube_bwd)]
float td_cube(float x) { return x * x * x; }
void td_cube_bwd(inout DifferentialPair<float> x, float d) { x = diffPair(x.p, 2.0 * x.p * x.p * d); }
[Differentiable] float td_model(float x, float w) { return td_cube(x) * w; }

[shader("compute")][numthreads(4, 1, 1)]
void td_scale(uint3 t: SV_DispatchThreadID, uniform float a, uniform RWStructuredBuffer<float> y) { y[t.x] *= a; }
"""


dsession = cell_fixture("dsession", FUNCS, "torch_debug")


@pytest.fixture
def widgets() -> Any:
    """slang_kernel.widgets, or a visible skip where anywidget is missing (the GPU machine has no Jupyter)."""
    pytest.importorskip("anywidget", reason="the widgets need anywidget (not on the GPU machine)")
    import slang_kernel.widgets

    return slang_kernel.widgets


def test_gradient_report_takes_tensors_that_require_grad(dsession: sk.Session) -> None:
    dev = _device(dsession)
    x = torch.tensor([1.0, 2.0], requires_grad=True, device=dev)
    y = torch.tensor([3.0, -1.0], requires_grad=True, device=dev)
    rep = gradient_report(dsession.function("td_mul"), x, y, grad_out=torch.tensor([1.0, 2.0], device=dev))
    assert rep.passed and [i.name for i in rep.inputs] == ["x", "y"]
    assert rep.input("x").bwd.tolist() == [6.0, -8.0]       # 2xy * grad_out
    assert rep.input("y").bwd.tolist() == [1.0, 8.0]        # x^2 * grad_out
    assert x.grad is None and y.grad is None                 # a check, not a backward pass


def test_the_gradient_flow_view_points_at_the_planted_bug(dsession: sk.Session, widgets: Any) -> None:
    GradientFlow = widgets.GradientFlow
    dev = _device(dsession)
    x = torch.tensor([1.0, 2.0], requires_grad=True, device=dev)
    w = torch.tensor([1.0, 1.0], requires_grad=True, device=dev)
    flow = GradientFlow.check(dsession.function("td_model"), x, w)
    assert flow.flagged == ["x"]                             # w's gradient (x^3) is right
    assert flow.result.input("x").bwd.tolist() == [2.0, 8.0]                 # the bug: 2x^2
    assert np.allclose(flow.result.input("x").numeric, [3.0, 12.0], rtol=1e-3)   # the truth: 3x^2
    assert flow.bad_nodes                                   # and the graph marks where it starts


def test_the_gradient_flow_view_records_a_training_loop(dsession: sk.Session, widgets: Any) -> None:
    GradientFlow = widgets.GradientFlow
    dev = _device(dsession)
    f = dsession.function("td_mul")
    w = torch.tensor([1.0, 2.0], requires_grad=True, device=dev)
    flow = GradientFlow()
    for step in range(3):
        w.grad = None
        f(torch.tensor([1.0, 1.0], device=dev) * (step + 1), w).sum().backward()    # d/dw x^2 w = x^2
        flow.record(step, {"w": w.grad})
    norms = flow.history("w")["norms"]
    assert norms == [math.sqrt(2.0), math.sqrt(32.0), math.sqrt(162.0)]


def test_the_nan_finder_stops_loss_backward_naming_the_input(open_session: Callable[..., sk.Session]) -> None:
    s = open_session("cpu", check_finite=True)
    try:
        s.run_cell(FUNCS, name="torch_debug")
        x = torch.tensor([1.0, 0.0, 2.0], requires_grad=True)
        loss = s.function("td_log")(x).sum()                 # log(0) = -inf: torch carries it on silently
        with pytest.raises(sk.NonFiniteError, match=r"bwd_diff\(td_log\): the gradient of input `x` holds \+inf at "
                                                    r"index 1 \(of 3\)"):
            loss.backward()
        x2 = torch.tensor([1.0, 4.0], requires_grad=True)    # the session goes on
        s.function("td_log")(x2).sum().backward()
        assert x2.grad.tolist() == [1.0, 0.25]
    finally:
        s.close()


def test_a_function_profile_and_the_dispatches_of_a_training_step(dsession: sk.Session) -> None:
    dev = _device(dsession)
    f = dsession.function("td_mul")
    x, w = torch.tensor([1.0, 2.0], device=dev), torch.tensor([3.0, 4.0], requires_grad=True, device=dev)
    p = f.profile(x, w)
    assert p.kernel == "td_mul.call" and p.backend == dsession.backend.name and p.run_ms >= 0
    assert f.profile(x, w, mode="bwd", grad_out=torch.ones(2, device=dev)).kernel == "td_mul.bwd"
    with dispatch_times(f) as times:
        f(x, w).sum().backward()
    assert [q.kernel for q in times.profiles] == ["td_mul.call", "td_mul.bwd"]
    assert w.grad.tolist() == [1.0, 4.0]                     # profiled, the step computes the same
    assert times.total_ms() >= times.total_ms("bwd") > 0 and "td_mul.bwd" in times.text()
    assert f.timings is None                                 # outside the block: not profiled
    with pytest.raises(ValueError, match=r"td_mul.profile\(\): mode is 'call' or 'bwd', not 'fwd'"):
        f.profile(x, w, mode="fwd")


def test_a_kernel_profile_takes_tensors(dsession: sk.Session) -> None:
    dev = _device(dsession)
    y = torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev)
    p = dsession.kernel("td_scale").profile(threads=4, a=2.0, y=y)
    if dev == "cuda":
        torch.cuda.synchronize()
    assert p.kernel == "td_scale" and y.tolist() == [2.0, 4.0, 6.0, 8.0]    # written in place, as a call does
    with pytest.raises(sk.ParameterError, match=r"parameter `y` .* takes float32 tensors; got torch.float64"):
        dsession.kernel("td_scale").profile(threads=4, a=2.0, y=y.double())


def test_a_live_view_shows_a_tensor_the_loop_updates(widgets: Any) -> None:
    img = torch.zeros(2, 3, 3, requires_grad=True)
    view = widgets.ImageView(img)
    with torch.no_grad():
        img += 0.5
    view.update(img)
    assert isinstance(view.image, np.ndarray) and view.image.shape == (2, 3, 3)
    assert view.image.tolist() == [[[0.5] * 3] * 3] * 2
