"""slang_kernel.torch.autograd: a Session function in torch's autograd graph, with exact gradients."""

from __future__ import annotations

import numpy as np
import pytest

import slang_kernel as sk
from tests.torch_support import cell_fixture, device as _device

torch = pytest.importorskip("torch")

FUNCS = """
[Differentiable] float tg_mul(float x, float y) { return x * x * y; }
[Differentiable] double tg_dbl(double x, double y) { return x * x * y + x / y; }   // no sin: SPIR-V has no double sin (Vulkan)
[Differentiable] float tg_nd(float x, no_diff float k) { return k * x * x; }
float tg_plain(float x) { return x + 1; }
"""


fsession = cell_fixture("fsession", FUNCS, "torch_autograd")


def test_backward_fills_grad_through_bwd_diff(fsession: sk.Session) -> None:
    dev = _device(fsession)
    x = torch.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
    y = torch.tensor([2.0, -1.0, 0.5], device=dev, requires_grad=True)
    r = fsession.function("tg_mul")(x, y)
    assert r.device.type == dev and r.grad_fn is not None
    assert r.tolist() == [2.0, -4.0, 4.5]
    r.backward(torch.tensor([1.0, 1.0, 2.0], device=dev))
    assert x.grad.tolist() == [4.0, -4.0, 6.0]        # d/dx x*x*y = 2xy, times grad_out
    assert y.grad.tolist() == [1.0, 4.0, 18.0]        # d/dy = x*x, times grad_out


def test_broadcast_inputs_get_the_summed_gradient(fsession: sk.Session) -> None:
    dev = _device(fsession)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev, requires_grad=True)
    y0 = torch.tensor(3.0, device=dev, requires_grad=True)       # 0-d: broadcasts
    y1 = torch.tensor([[1.0], [2.0]], device=dev, requires_grad=True)   # (2, 1): broadcasts along columns
    fsession.function("tg_mul")(x, y0).sum().backward()
    assert y0.grad.shape == () and float(y0.grad) == 1 + 4 + 9 + 16
    assert x.grad.tolist() == [[6.0, 12.0], [18.0, 24.0]]
    x.grad = None
    fsession.function("tg_mul")(x, y1).sum().backward()
    assert y1.grad.shape == (2, 1) and y1.grad.tolist() == [[5.0], [25.0]]
    x.grad = None
    fsession.function("tg_mul")(x, 2.0).sum().backward()       # a Python number: no gradient of its own
    assert x.grad.tolist() == [[4.0, 8.0], [12.0, 16.0]]


def test_no_diff_parameters_get_no_gradient(fsession: sk.Session) -> None:
    x = torch.tensor([1.0, 2.0], device=_device(fsession), requires_grad=True)
    k = torch.tensor([3.0, 5.0], device=_device(fsession))
    fsession.function("tg_nd")(x, k).sum().backward()
    assert x.grad.tolist() == [6.0, 20.0] and k.grad is None
    with pytest.raises(sk.ParameterError, match=r"tg_nd\(\): parameter `k` \(float\) is not differentiable.*\.detach\(\)"):
        fsession.function("tg_nd")(x, k.clone().requires_grad_())


def test_gradcheck_in_float64(fsession: sk.Session) -> None:
    dev = _device(fsession)
    x = torch.linspace(-1, 1, 7, dtype=torch.float64, device=dev, requires_grad=True)
    y = torch.linspace(0.5, 2, 7, dtype=torch.float64, device=dev, requires_grad=True)
    assert torch.autograd.gradcheck(fsession.function("tg_dbl"), (x, y))


def test_without_grad_it_returns_plain_tensors(fsession: sk.Session) -> None:
    x = torch.tensor([1.0, 2.0], device=_device(fsession), requires_grad=True)
    with torch.no_grad():
        r = fsession.function("tg_mul")(x, x)
    assert r.grad_fn is None and r.tolist() == [1.0, 8.0]
    assert fsession.function("tg_plain")(torch.tensor([1.0, 2.0], device=_device(fsession))).tolist() == [2.0, 3.0]


def test_bad_tensors_are_refused_before_launch_and_the_session_goes_on(fsession: sk.Session) -> None:
    f = fsession.function("tg_mul")
    dev = _device(fsession)
    with pytest.raises(sk.ParameterError, match=r"parameter `y` \(float\) takes float32 tensors; got torch.float64"):
        f(torch.ones(2, device=dev), torch.ones(2, dtype=torch.float64, device=dev))
    with pytest.raises(sk.ParameterError, match=r"parameter `x` \(float\) is not differentiable"):
        fsession.function("tg_plain")(torch.ones(2, device=dev, requires_grad=True))
    assert f(torch.ones(2, device=dev), torch.full((2,), 3.0, device=dev)).tolist() == [3.0, 3.0]


def test_wrong_device_names_the_parameter_and_both_devices(cpu_session: sk.Session) -> None:
    cpu_session.run_cell(FUNCS, name="torch_autograd")
    meta = torch.ones(2, device="meta")
    with pytest.raises(sk.ParameterError, match=r"tg_mul\(\): parameter `y` \(float\) is on meta, but the cpu "
                                                r"backend takes cpu tensors; move it with `.to\('cpu'\)`"):
        cpu_session.function("tg_mul")(torch.ones(2), meta)
    assert cpu_session.function("tg_mul")(torch.ones(2), torch.ones(2)).shape == (2,)   # the session goes on


def test_check_grad_and_the_nan_finder_take_tensors(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell(FUNCS + "[Differentiable] float tg_log(float x) { return log(x); }", name="torch_autograd")
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    assert s.function("tg_mul").check_grad(x, torch.tensor([2.0, 3.0])).passed
    g = s.function("tg_mul").bwd(x, torch.tensor([2.0, 3.0]), grad_out=torch.ones(2))
    assert [a.tolist() for a in g] == [[2.0, 9.0], [0.25, 2.25]]
    with pytest.raises(sk.NonFiniteError, match="x"):
        s.function("tg_log").bwd(torch.tensor([0.0, 1.0]), check_finite=True)


def test_shapes_are_checked_before_launch_naming_the_parameters(cpu_session: sk.Session) -> None:
    cpu_session.run_cell(FUNCS + "[Differentiable] float tg_v(float3 p, float s) { return dot(p, p) * s; }",
                         name="torch_autograd")
    f, v = cpu_session.function("tg_mul"), cpu_session.function("tg_v")
    with pytest.raises(sk.ParameterError, match=r"tg_mul\(\): the shapes of `x` \(3,\), `y` \(4,\) do not broadcast "
                                                r"together .* e.g. `t\[:, None\]`"):
        f(torch.ones(3, requires_grad=True), torch.ones(4))
    assert f(torch.ones(3)[:, None], torch.ones(4)).shape == (3, 4)       # the advice followed
    with pytest.raises(sk.ParameterError, match=r"tg_v\(\): parameter `p` \(float3\) takes tensors whose last "
                                                r"dimension is 3; got shape \(4, 2\)"):
        v(torch.ones(4, 2), torch.ones(4))
    p = torch.tensor([[1.0, 2.0, 2.0], [0.0, 3.0, 4.0]], requires_grad=True)
    s = torch.tensor(2.0, requires_grad=True)                                  # 0-d: broadcast over the batch
    out = v(p, s)
    assert out.tolist() == [18.0, 50.0]
    out.sum().backward()
    assert p.grad.tolist() == [[4.0, 8.0, 8.0], [0.0, 12.0, 16.0]] and float(s.grad) == 9.0 + 25.0
