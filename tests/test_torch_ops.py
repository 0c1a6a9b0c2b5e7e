"""slang_kernel.torch.ops: a kernel and its backward kernel as a torch op, with exact gradients."""

from __future__ import annotations

from typing import Callable

import pytest

import slang_kernel as sk

torch = pytest.importorskip("torch")
from slang_kernel.torch.ops import KernelOp  # noqa: E402  (imports torch: after the skip where it is missing)
from tests.torch_support import cell_fixture, device as _device

KERNELS = """
[Differentiable] float ko_f(float x, float w) { return w * x * x; }
[shader("compute")][numthreads(4, 1, 1)]
void ko_fwd(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> w,
            uniform StructuredBuffer<float> k, uniform RWStructuredBuffer<float> y, uniform float scale)
{
    uint n, stride; y.GetDimensions(n, stride);
    if (t.x >= n) return;
    y[t.x] = scale * k[t.x] * ko_f(x[t.x], w[t.x]);
}
// the adjoint of ko_fwd: bwd_diff of the per-thread function, no gradient for k
[shader("compute")][numthreads(4, 1, 1)]
void ko_bwd(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> w,
            uniform StructuredBuffer<float> k, uniform StructuredBuffer<float> grad_y,
            uniform RWStructuredBuffer<float> grad_x, uniform RWStructuredBuffer<float> grad_w, uniform float scale)
{
    uint n, stride; grad_x.GetDimensions(n, stride);
    if (t.x >= n) return;
    var dx = diffPair(x[t.x]);
    var dw = diffPair(w[t.x]);
    bwd_diff(ko_f)(dx, dw, scale * k[t.x] * grad_y[t.x]);
    grad_x[t.x] = dx.d;
    grad_w[t.x] = dw.d;
}
[Differentiable] double ko_g(double x) { return x * x * x - 2.0 * x; }
[shader("compute")][numthreads(4, 1, 1)]
void ko_fwd_d(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<double> x, uniform RWStructuredBuffer<double> y)
{
    uint n, stride; y.GetDimensions(n, stride);
    if (t.x < n) y[t.x] = ko_g(x[t.x]);
}
[shader("compute")][numthreads(4, 1, 1)]
void ko_bwd_d(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<double> x, uniform StructuredBuffer<double> grad_y,
              uniform RWStructuredBuffer<double> grad_x)
{
    uint n, stride; grad_x.GetDimensions(n, stride);
    if (t.x >= n) return;
    var dx = diffPair(x[t.x]);
    bwd_diff(ko_g)(dx, grad_y[t.x]);
    grad_x[t.x] = dx.d;
}
// not element-wise: one thread per row sums it (threads= and outputs= shapes given to the op)
[shader("compute")][numthreads(4, 1, 1)]
void ko_rows(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform RWStructuredBuffer<float> y,
             uniform uint cols)
{
    uint n, stride; y.GetDimensions(n, stride);
    if (t.x >= n) return;
    float s = 0;
    for (uint c = 0; c < cols; c++) s += x[t.x * cols + c] * x[t.x * cols + c];
    y[t.x] = s;
}
[shader("compute")][numthreads(4, 1, 1)]
void ko_rows_bwd(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> grad_y,
                 uniform RWStructuredBuffer<float> grad_x, uniform uint cols)
{
    uint n, stride; grad_y.GetDimensions(n, stride);
    if (t.x >= n) return;
    for (uint c = 0; c < cols; c++) grad_x[t.x * cols + c] = 2 * x[t.x * cols + c] * grad_y[t.x];
}
"""


osession = cell_fixture("osession", KERNELS, "torch_ops")


def _op(s: sk.Session) -> KernelOp:
    return KernelOp(s.kernel("ko_fwd"), s.kernel("ko_bwd"), inputs=("x", "w", "k"), outputs=("y",))


def test_the_kernel_pair_is_an_op_with_exact_gradients(osession: sk.Session) -> None:
    dev = _device(osession)
    x = torch.arange(6.0, device=dev, requires_grad=True)          # 6 elements: 2 groups of 4, 2 threads idle
    w = torch.full((6,), 2.0, device=dev, requires_grad=True)
    k = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0, 0.0], device=dev)
    y = _op(osession)(x=x, w=w, k=k, scale=0.5)
    assert y.grad_fn is not None and y.device.type == dev
    assert y.tolist() == [0.0, 1.0, 4.0, 9.0, 32.0, 0.0]              # 0.5 * k * w * x^2
    y.sum().backward()                                                # torch hands back an expanded gradient
    assert x.grad.tolist() == [0.0, 2.0, 4.0, 6.0, 16.0, 0.0]         # 0.5 * k * 2wx
    assert w.grad.tolist() == [0.0, 0.5, 2.0, 4.5, 16.0, 0.0]         # 0.5 * k * x^2
    assert k.grad is None


def test_the_op_composes_with_torch_ops(osession: sk.Session) -> None:
    dev = _device(osession)
    x = torch.tensor([1.0, 2.0], device=dev, requires_grad=True)
    w = torch.tensor([3.0, 4.0], device=dev, requires_grad=True)
    y = _op(osession)(x=x * 2, w=w, k=torch.ones(2, device=dev), scale=1.0)   # w * (2x)^2
    (y * torch.tensor([1.0, 10.0], device=dev)).sum().backward()
    assert x.grad.tolist() == [24.0, 640.0]                           # 8wx times the weights
    assert w.grad.tolist() == [4.0, 160.0]


def test_gradcheck_of_a_double_kernel_pair(osession: sk.Session) -> None:
    dev = _device(osession)
    op = KernelOp(osession.kernel("ko_fwd_d"), osession.kernel("ko_bwd_d"), inputs=("x",), outputs=("y",))
    x = torch.linspace(-1.5, 1.5, 9, dtype=torch.float64, device=dev, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: op(x=t), (x,))


def test_an_op_that_is_not_element_wise(osession: sk.Session) -> None:
    dev = _device(osession)
    op = KernelOp(osession.kernel("ko_rows"), osession.kernel("ko_rows_bwd"), inputs=("x",),
                  outputs={"y": lambda t: t["x"].shape[:1]}, threads=lambda t: t["x"].shape[0])
    x = torch.tensor([[1.0, 2.0, 2.0], [0.0, 3.0, 4.0]], device=dev, requires_grad=True)
    y = op(x=x, cols=3)
    assert y.shape == (2,) and y.tolist() == [9.0, 25.0]
    (y * torch.tensor([1.0, -1.0], device=dev)).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0, 4.0], [0.0, -6.0, -8.0]]


def test_bad_input_is_refused_before_launch_and_the_op_goes_on(osession: sk.Session) -> None:
    op, dev = _op(osession), _device(osession)
    x, w, k = (torch.ones(4, device=dev) for _ in range(3))
    with pytest.raises(sk.ParameterError, match=r"KernelOp\(ko_fwd, ko_bwd\): input `k` is missing; pass k="):
        op(x=x, w=w, scale=1.0)
    with pytest.raises(sk.ParameterError, match=r"input `w` is indexed as a flat buffer and needs a contiguous tensor; "
                                                r"got strides \(2,\); pass `.contiguous\(\)`"):
        op(x=x, w=torch.ones(8, device=dev)[::2], k=k, scale=1.0)
    with pytest.raises(sk.ParameterError, match=r"input `w` has shape \(5,\), but `x` has \(4,\)"):
        op(x=x, w=torch.ones(5, device=dev), k=k, scale=1.0)
    with pytest.raises(sk.ParameterError, match=r"input `k` gets no gradient \(ko_bwd writes no `grad_k`\), but the "
                                                r"tensor requires grad; pass `.detach\(\)`"):
        op(x=x, w=w, k=k.clone().requires_grad_(), scale=1.0)
    with pytest.raises(sk.ParameterError, match=r"ko_fwd\(\): parameter `x` \(StructuredBuffer<float>\) takes float32 "
                                                r"tensors; got torch.float64"):
        op(x=torch.ones(4, dtype=torch.float64, device=dev), w=w, k=k, scale=1.0)
    with pytest.raises(sk.ParameterError, match=r"`y` is an output; the op allocates it"):
        op(x=x, w=w, k=k, y=torch.ones(4, device=dev), scale=1.0)
    assert op(x=x, w=w, k=k, scale=3.0).tolist() == [3.0] * 4       # the advice followed: it runs


def test_a_backward_kernel_that_is_not_an_adjoint_is_refused(osession: sk.Session) -> None:
    with pytest.raises(sk.ParameterError, match=r"the backward kernel ko_fwd_d takes the forward's inputs and "
                                                r"`grad_<output>` for each output; it lacks `grad_y`"):
        KernelOp(osession.kernel("ko_fwd_d"), osession.kernel("ko_fwd_d"), inputs=("x",), outputs=("y",))
    with pytest.raises(sk.ParameterError, match=r"ko_fwd has no parameter `z`"):
        KernelOp(osession.kernel("ko_fwd"), osession.kernel("ko_bwd"), inputs=("x", "w", "k"), outputs=("z",))


def test_a_checked_launch_reports_an_op_writing_out_of_range(open_session: Callable[..., sk.Session]) -> None:
    s = open_session("cpu", checked=True)
    try:
        s.run_cell(KERNELS + """
[shader("compute")][numthreads(4, 1, 1)]
void ko_over(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> w,
             uniform StructuredBuffer<float> k, uniform RWStructuredBuffer<float> y, uniform float scale)
{ y[t.x + 1] = x[t.x]; }   // the planted bug: one past the end
""", name="torch_ops")
        bad = KernelOp(s.kernel("ko_over"), s.kernel("ko_bwd"), inputs=("x", "w", "k"), outputs=("y",))
        x = torch.ones(4, requires_grad=True)
        with pytest.raises(sk.BoundsError, match="y"):
            bad(x=x, w=torch.ones(4), k=torch.ones(4), scale=1.0)
        good = _op(s)(x=x, w=torch.ones(4), k=torch.ones(4), scale=1.0)   # the session goes on
        good.sum().backward()
        assert x.grad.tolist() == [2.0] * 4
    finally:
        s.close()
