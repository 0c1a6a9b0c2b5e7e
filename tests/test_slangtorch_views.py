"""A slangtorch module in the notebook: its kernels shown as any kernel is (code per target, reflection,
IR graph), and the debugging views on its launches (checked launches, the NaN finder, timings).

The views that need no launch run here on the real compiler; the launch-dependent ones need CUDA and
skip, saying so, without it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import slang_kernel.slangtorch as slangtorch
from slang_kernel.errors import BoundsError
from slang_kernel import NonFiniteError
from slang_kernel.torch.slangtorch import Loader, debug_launches, module_views
from slang_kernel.torch.slangtorch._debug import DispatchLog, LaunchTiming, checked_code, first_nonfinite, tensors_of
from slang_kernel.torch.slangtorch._notebook import function_text

torch = pytest.importorskip("torch")

DATA = Path(__file__).parent / "data" / "slang_torch"
BEZIER = Path(__file__).parent.parent / "notebooks" / "bezier.slang"
NO_CUDA = "torch has no CUDA device here (CPU-only torch or no GPU): launches need one"


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Loader:
    return Loader(cache_dir=tmp_path_factory.mktemp("slangtorch-views-cache"))


@pytest.fixture(scope="module")
def square(loader: Loader) -> slangtorch.SlangTorchModule:
    return slangtorch.loadModule(DATA / "autobind-square-diff.slang", loader=loader)


def test_a_kernel_shows_its_cuda_per_launch_and_its_host_code(square: slangtorch.SlangTorchModule) -> None:
    v = module_views(square)
    assert v.kernels == ("square",)
    cuda = v.code("square")
    # the kernel m.square(...) launches, and those m.square.fwd / .bwd launch, each once, in full
    for symbol in ("__kernel__square", "__kernel__square_fwd_diff", "__kernel__square_bwd_diff"):
        assert len(re.findall(rf"__global__ void {symbol}\(", cuda)) == 1
    assert cuda.count("{") == cuda.count("}")
    host = v.code("square", "torch-binding")
    assert re.search(r"\bvoid square\(", host) and "cudaLaunchKernel" in host
    assert "struct TensorView" not in v.code(target="cuda")   # the module's code after Slang's prelude
    with pytest.raises(ValueError, match="cuda, torch-binding; not 'hlsl'"):
        v.code("square", "hlsl")
    with pytest.raises(KeyError, match="its kernels: square"):
        v.code("cube")


def test_reflection_gives_slang_types_the_packed_c_layout_and_the_symbols(square: slangtorch.SlangTorchModule) -> None:
    r = module_views(square).reflection()
    k = r["kernels"]["square"]
    assert k["differentiable"] and k["symbols"] == {"launch": "__kernel__square", "fwd": "__kernel__square_fwd_diff",
                                                    "bwd": "__kernel__square_bwd_diff"}
    assert [p["name"] for p in k["params"]] == ["input", "output"]
    # a DiffTensorView is two 56-byte TensorViews (primal, gradient) as the kernel receives it
    assert all(p["type"].startswith("DiffTensorView") and p["size"] == 112 for p in k["params"])
    assert r["torch_entry_points"] == []


def test_struct_parameters_are_reflected_with_their_fields(loader: Loader) -> None:
    m = slangtorch.loadModule(DATA / "autobind-multiply-struct.slang", loader=loader)
    r = module_views(m).reflection()
    assert r["structs"] == {"Foo": ["A", "B"]}
    foo, result = r["kernels"]["multiply"]["params"]
    assert (foo["name"], foo["type"], foo["kind"], foo["c_type"], foo["size"]) == ("foo", "Foo", "struct", "Foo", 112)
    assert (result["kind"], result["size"]) == ("tensor", 56)


def test_torch_entry_points_and_struct_types_are_listed(loader: Loader) -> None:
    m = slangtorch.loadModule(DATA / "smoke.slang", loader=loader)
    v = module_views(m)
    assert v.reflection()["torch_entry_points"] == ["runCompute"]
    assert "function runCompute (host code)" in v.text()
    assert "__global__ void myKernel(" in v.code("myKernel")


def test_the_module_displays_in_a_notebook_as_a_cell_does(square: slangtorch.SlangTorchModule) -> None:
    bundle = square._repr_mimebundle_()
    assert "kernel   [Differentiable] void square(" in bundle["text/plain"]
    assert "input: DiffTensorView<float, AtomicAdd> -> DiffTensorView (112 bytes)" in bundle["text/plain"]
    html = bundle["text/html"]
    assert "<summary>cuda</summary>" in html and "<summary>torch-binding</summary>" in html
    assert "__global__ void __kernel__square_bwd_diff(" in html


def test_ir_and_ir_graph_with_the_kernels_derivatives(square: slangtorch.SlangTorchModule) -> None:
    v = module_views(square)
    ir = v.ir()
    assert re.search(r"func %square\b", ir.module_ir) and ir.dump == "" and "square" in ir.functions
    data = v.ir_graph_data("square")
    titles = [view["title"] for view in data["views"]]
    assert titles == ["module (-g)", "AFTER finalizeAutoDiffPass"]
    after = data["views"][1]["functions"]
    roles = {f["role"] for f in after if f["primal"] == "square"}
    assert {"forward", "backward_propagate"} <= roles
    # cut to the module's own functions: no prelude/library function left in the derivative view
    assert all(f["name"] == "square" or f["primal"] == "square" for f in after)
    first = data["related"][0]
    assert first[0] == "module" and any(f["id"] == first[1] and f["name"] == "square"
                                        for f in data["views"][0]["functions"])
    assert len(data["related"]) > 1   # the kernel, then its derivatives beside it
    # instructions point at the .slang file's lines (the multiply is on line 11)
    square_fn = next(f for f in data["views"][0]["functions"] if f["name"] == "square")
    assert 11 in {i["loc"][0] for b in square_fn["blocks"] for i in b["insts"] if i["loc"]}


def test_the_ir_graph_widget_opens_on_the_kernel_beside_its_derivatives(square: slangtorch.SlangTorchModule) -> None:
    pytest.importorskip("anywidget", reason="the widgets need anywidget (not on the GPU machine)")
    from slang_kernel.widgets import IRGraph

    widget = IRGraph(module_views(square).ir_graph_data("square"), columns="derivatives")
    assert widget.function and "square" in widget.to_html()
    assert "s_bwdProp_square" in widget.to_html().replace("x5F", "_") or "bwd_diff(square)" in widget.to_html()


def test_the_bezier_example_module_shows_without_a_gpu(loader: Loader) -> None:
    m = slangtorch.loadModule(str(BEZIER), defines={"NUM_CTRL_PTS": 20, "DIM": 2}, loader=loader)
    v = module_views(m)
    assert v.kernels == ("bezier2D", "bezier2DSDF", "compute_coeffs")
    assert "__global__ void __kernel__bezier2D_bwd_diff(" in v.code("bezier2D")
    data = v.ir_graph_data("bezier2D")
    assert any(f["primal"] == "bezier2D" and f["role"] == "backward_propagate" for f in data["views"][1]["functions"])


def test_function_text_skips_declarations() -> None:
    code = "void f(int a);\nint g() { return 1; }\nvoid f(int a)\n{\n    if (a) { g(); }\n}\n"
    assert function_text(code, "f") == "void f(int a)\n{\n    if (a) { g(); }\n}"
    assert function_text(code, "h") == ""


def test_checked_build_checks_every_tensor_view_access(square: slangtorch.SlangTorchModule) -> None:
    code = checked_code(square.code)
    struct = re.search(r"\nstruct TensorView\s*\n\{.*?\n\};", code, re.DOTALL)
    assert struct is not None
    accesses = len(re.findall(r"reinterpret_cast<T\s*\*>\(\s*data \+", square.code))
    assert accesses >= 10   # data_ptr_at, load and store in 1-5 dimensions
    assert struct.group(0).count("sk_tv_checked<T>(data, strides, sizes, dimensionCount, data +") == accesses
    assert not re.search(r"reinterpret_cast<T\s*\*>\(\s*data \+", struct.group(0))
    assert code.index("sk_bounds_report") < code.index("sk_tv_checked") < struct.start()
    assert code.endswith(square.code[-2000:])   # the kernels themselves untouched
    with pytest.raises(ValueError, match="no `struct TensorView`"):
        checked_code("__global__ void k() {}")


_HOST_SHIM = r"""
#include <cstdint>
#include <cstdio>
#define __device__
typedef unsigned int uint;
struct uint2 { uint x, y; }; struct uint3 { uint x, y, z; }; struct uint4 { uint x, y, z, w; };
static const int kSlangTorchTensorMaxDim = 5;
static unsigned char sk_scratch[64];
static unsigned long long last_index = ~0ull, last_size = 0;
static const void* last_data = nullptr;
void* sk_oob_slot(unsigned long long, unsigned long long index, unsigned long long size, const void* data)
{ last_index = index; last_size = size; last_data = data; return sk_scratch; }
"""
_HOST_MAIN = r"""
int main() {
    float a[6] = {0, 1, 2, 3, 4, 5};
    TensorView t{}; t.data = (uint8_t*)a; t.dimensionCount = 2; t.sizes[0] = 3; t.sizes[1] = 2;
    t.strides[0] = 8; t.strides[1] = 4;
    printf("%g %d\n", t.load<float>(2, 1), last_data == nullptr);
    t.load<float>(3, 0);
    printf("%llu %llu %d\n", last_index, last_size, last_data == a);
    t.store<float>(uint2{3, 1}, 7.0f);
    printf("%llu %g\n", last_index, a[5]);
    return 0;
}
"""


def test_the_checked_tensor_view_runs_as_host_code(square: slangtorch.SlangTorchModule, tmp_path: Path) -> None:
    """The patched TensorView of the checked build, compiled by g++ with `__device__` defined away and
    sk_oob_slot recording what it is given: in-range accesses read memory, out-of-range ones the scratch."""
    import shutil
    import subprocess

    if shutil.which("g++") is None:
        pytest.skip("needs g++ (the CPU backend's compiler)")
    from slang_kernel.torch.slangtorch._debug import _HELPER

    struct = re.search(r"\nstruct TensorView\s*\n\{.*?\n\};", checked_code(square.code), re.DOTALL)
    assert struct is not None
    (tmp_path / "tv.cpp").write_text(_HOST_SHIM + _HELPER + struct.group(0) + _HOST_MAIN)
    build = subprocess.run(["g++", "-std=c++17", "-o", str(tmp_path / "tv"), str(tmp_path / "tv.cpp")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    got = subprocess.run([str(tmp_path / "tv")], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got == ["5 1",      # t[2, 1] in range: read, nothing recorded
                   "6 6 1",    # t[3, 0]: element 6 of 6, of this tensor's data
                   "7 5"]      # a store to t[3, 1] went to scratch: the tensor is untouched


def test_the_nan_finder_names_tensors_of_pairs_and_structs() -> None:
    x, gx, y = torch.zeros(3), torch.zeros(3), torch.zeros(2, 2)
    point = slangtorch.SlangTorchModule.DiffTensorView(x, gx)
    args = [("input", point), ("output", (y, (gx,))), ("s", {"a": x, "n": 3})]
    assert [label for label, _ in (lt for n, v in args for lt in tensors_of(n, v))] == \
        ["input", "input.grad", "output", "output.grad", "s.a"]
    y[1, 0] = float("nan")
    assert first_nonfinite(y)[0] == (1, 0) and first_nonfinite(x) is None
    assert first_nonfinite(torch.tensor([1.0, -float("inf")])) == ((1,), -float("inf"))
    assert first_nonfinite(torch.tensor([1, 2])) is None


def test_debug_launches_and_the_timings_table(square: slangtorch.SlangTorchModule) -> None:
    d = debug_launches(square, check_finite=True, timings=True)
    try:
        assert square.debug is d and d.active and not d.checked
        log = DispatchLog()
        for run in (0.5, 1.5):
            log.profiles.append(LaunchTiming("square", "__kernel__square", (1, 1, 1), (32, 1, 1), run, run + 0.1))
        log.count("square")
        assert log.summary() == [("square", 2, 1.0, 0.5, 1.5)]
        assert "square: 2 timed, mean 1.000 ms" in repr(log) and "<td>1.000</td>" in log._repr_html_()
    finally:
        debug_launches(square)
    assert square.debug is not None and not square.debug.active


# -- launches: CUDA only -------------------------------------------------------------------------------

def _cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip(NO_CUDA)


@pytest.mark.cuda
def test_checked_launch_finds_the_bezier_examples_off_by_one(loader: Loader) -> None:
    """bezier2D returns early only for `tIdx.x > t.size(0)`: thread t.size(0) reads and writes one past the end."""
    _cuda()
    m = slangtorch.loadModule(str(BEZIER), defines={"NUM_CTRL_PTS": 20, "DIM": 2}, loader=loader)
    t = torch.linspace(0.0, 1, 100, device="cuda")
    ctrl = torch.rand(20, 2, device="cuda")
    out = torch.zeros(100, 2, device="cuda")
    debug_launches(m, checked=True)
    try:
        with pytest.raises(BoundsError) as info:
            m.bezier2D(t=t, control_pts=ctrl, output=out).launchRaw(blockSize=(1, 1, 1), gridSize=(1024, 1, 1))
        assert info.value.buffer in ("t", "output") and info.value.thread == (100, 0, 0)
        torch.cuda.synchronize()   # the context survived
    finally:
        debug_launches(m)


@pytest.mark.cuda
def test_nan_finder_and_timings_on_launches(loader: Loader) -> None:
    _cuda()
    m = slangtorch.loadModule(DATA / "autobind-square-diff.slang", loader=loader)
    x = torch.tensor([1.0, float("inf"), 3.0], device="cuda")
    y = torch.zeros(3, device="cuda")
    d = debug_launches(m, check_finite=True, timings=True)
    try:
        with pytest.raises(NonFiniteError, match=r"`output` at index 1.*Already non-finite before this launch.*input"):
            m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        x[1] = 2.0
        m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert y.tolist() == [1.0, 4.0, 9.0]
        # the backward launch: gradients scanned too (`input.grad` holds what bwd wrote)
        gx, gy = torch.zeros_like(x), torch.ones_like(y)
        m.square.bwd(input=(x, gx), output=(y, gy)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert gx.tolist() == [2.0, 4.0, 6.0]
        assert d.log.launches == 3 and len(d.log.profiles) == 3 and d.log.profiles[-1].run_ms >= 0
        assert [p.symbol for p in d.log.profiles] == ["__kernel__square"] * 2 + ["__kernel__square_bwd_diff"]
    finally:
        debug_launches(m)
