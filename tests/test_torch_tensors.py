"""slang_kernel.torch.tensors: torch tensors as a kernel's buffers, written in place, checked before launch."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.torch.tensors import scalar_dtype
from tests.torch_support import cell_fixture, device as _device

torch = pytest.importorskip("torch")

KERNELS = """
[shader("compute")][numthreads(4, 1, 1)]
void tt_axpy(uint3 t: SV_DispatchThreadID, uniform float a, uniform StructuredBuffer<float> x,
             uniform RWStructuredBuffer<float> y) { y[t.x] = a * x[t.x] + y[t.x]; }
"""


ksession = cell_fixture("ksession", KERNELS, "torch_tensors")


def test_rw_buffers_are_written_into_the_tensor_in_place(ksession: sk.Session) -> None:
    dev = _device(ksession)
    x = torch.arange(8, dtype=torch.float32, device=dev)
    y = torch.ones(8, device=dev)
    ptr = y.data_ptr()
    assert ksession.kernel("tt_axpy")(threads=8, a=2.0, x=x, y=y) is None
    if dev == "cuda":
        torch.cuda.synchronize()
    assert y.data_ptr() == ptr and y.tolist() == [1.0 + 2 * i for i in range(8)]


def test_a_tensor_and_numpy_arrays_mix(ksession: sk.Session) -> None:
    y = torch.zeros(4, device=_device(ksession))
    ksession.kernel("tt_axpy")(threads=4, a=1.0, x=np.arange(4, dtype=np.float32) if ksession.backend.name != "cuda"
                               else torch.arange(4.0, device="cuda"), y=y)
    if y.is_cuda:
        torch.cuda.synchronize()
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_bad_tensors_are_refused_before_launch(ksession: sk.Session) -> None:
    k, dev = ksession.kernel("tt_axpy"), _device(ksession)
    x = torch.ones(8, device=dev)
    with pytest.raises(sk.ParameterError, match=r"tt_axpy\(\): parameter `y` \(RWStructuredBuffer<float>\) takes "
                                                r"float32 tensors; got torch.float64; convert it with `.to\(torch.float32\)`"):
        k(threads=8, a=1.0, x=x, y=torch.ones(8, dtype=torch.float64, device=dev))
    strided = torch.ones(16, device=dev)[::2]
    with pytest.raises(sk.ParameterError, match=r"parameter `y` .* is written in place and needs a contiguous tensor; "
                                                r"got strides \(2,\); pass `.contiguous\(\)`"):
        k(threads=8, a=1.0, x=x, y=strided)
    with pytest.raises(sk.ParameterError, match=r"parameter `x` .* is not differentiable, but the tensor requires "
                                                r"grad; pass `.detach\(\)`"):
        k(threads=8, a=1.0, x=x.clone().requires_grad_(), y=torch.ones(8, device=dev))
    fixed = strided.contiguous()                      # the advice, followed: it runs, the result is in `fixed`
    k(threads=8, a=1.0, x=x.clone().requires_grad_().detach(), y=fixed)
    if dev == "cuda":
        torch.cuda.synchronize()
    assert fixed.tolist() == [2.0] * 8


def test_wrong_device_names_the_parameter_and_both_devices(cpu_session: sk.Session) -> None:
    cpu_session.run_cell(KERNELS, name="torch_tensors")
    with pytest.raises(sk.ParameterError, match=r"tt_axpy\(\): parameter `x` \(StructuredBuffer<float>\) is on meta, "
                                                r"but the cpu backend takes cpu tensors"):
        cpu_session.kernel("tt_axpy")(threads=4, a=1.0, x=torch.ones(4, device="meta"), y=torch.ones(4))


def test_the_scalar_dtype_of_slang_types() -> None:
    assert scalar_dtype("float3") == np.float32 and scalar_dtype("double") == np.float64
    assert scalar_dtype("uint") == np.uint32 and scalar_dtype("int64_t") == np.int64
    assert scalar_dtype("MyStruct") is None and scalar_dtype("floaty") is None


@pytest.mark.cuda
def test_cuda_tensors_pass_through_without_copies(open_session: Callable[..., sk.Session]) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch here")
    from slang_kernel.torch.autograd import plain_args

    s = open_session("cuda")
    s.run_cell("[Differentiable] float tt_sq(float x) { return x * x; }", name="tt_sq")
    f = s.function("tt_sq")
    x = torch.arange(16, dtype=torch.float32, device="cuda", requires_grad=True)
    assert plain_args(f, (x,))[0].data.ptr == x.data_ptr()          # a CuPy view, not a copy
    y = f(x)
    assert y.is_cuda and y.grad_fn is not None
    y.backward(torch.ones_like(y))
    assert x.grad.tolist() == [2.0 * i for i in range(16)]
    s.close()


def test_the_nan_finder_and_checked_launches_see_tensors(open_session: Callable[..., sk.Session]) -> None:
    s = open_session("cpu", checked=True)
    try:
        s.run_cell(KERNELS + """
[shader("compute")][numthreads(4, 1, 1)]
void tt_over(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y) { y[t.x + 1] = 1.0; }""",
                   name="torch_tensors")
        y = torch.zeros(4)
        with pytest.raises(sk.NonFiniteError, match="y"):
            s.kernel("tt_axpy")(threads=4, a=float("inf"), x=torch.ones(4), y=y, check_finite=True)
        with pytest.raises(sk.BoundsError):
            s.kernel("tt_over")(threads=4, y=torch.zeros(4))
    finally:
        s.close()
