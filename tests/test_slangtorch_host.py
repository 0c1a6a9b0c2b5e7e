"""[TorchEntryPoint] host code without a GPU: Slang's torch-binding C++ for slang-torch's own test modules
(tests/data/slang_torch, unchanged) builds with g++ against our torch shim, and its host logic runs:
arguments in (tensors, scalars, structs as tuples), allocations and fills through the callbacks, results
out, C++ errors back as Python ones. Launching the kernels it dispatches needs CUDA (the last tests)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

import slang_kernel.slangtorch as slangtorch
from slang_kernel.torch.slangtorch import Loader, SlangTorchModule
from slang_kernel.torch.slangtorch._host_abi import HostLibrary
from slang_kernel.torch.slangtorch._module import HostFunction
from slang_kernel.torch.slangtorch._host_build import HostBuildError, build_host_library, kernel_declarations
from slang_kernel.torch.slangtorch._layout import pack

torch = pytest.importorskip("torch")

SLANG_TORCH = Path(__file__).parent / "data" / "slang_torch"

HOST = """
struct Outputs
{
    TorchTensor<float> grid;
    TorchTensor<int> counts;
    TorchTensor<half> like;
    float scale;
    uint n;
    half h;
};

[TorchEntryPoint]
Outputs allocate(uint rows, uint cols, float value, half h, TorchTensor<float> other)
{
    Outputs o;
    o.grid = TorchTensor<float>.alloc(rows, cols);
    o.grid.fillValue(value);
    o.counts = TorchTensor<int>.alloc(cols);
    o.counts.fillZero();
    o.like = TorchTensor<half>.zerosLike(TorchTensor<half>.alloc(other.size(0), other.size(1), 2));
    o.scale = value * 2.0;
    o.n = rows * cols + other.dims();
    o.h = h * 2.h;
    return o;
}
"""

MORE = """
struct Inner { float3 v; int k; };
struct Outer { Inner inner; TorchTensor<float> t; float3x3 m; };

[CudaKernel]
void k1(TensorView<float> a, float3 v, float3x3 m, half h, bool b, int64_t big) { }

[TorchEntryPoint]
float3 vec(float3 v, float3x3 m, float[2] arr, Outer o, double d, bool b, int64_t big, int8_t small)
{
    var x = TorchTensor<float>.emptyLike(o.t);
    var y = TorchTensor<double>.alloc(1, 2, 3, 4, 5);
    y.fillValue(d);
    return v * m[0][1] + float3(arr[0], arr[1], float(big + small)) + o.inner.v * o.inner.k;
}

[TorchEntryPoint]
TorchTensor<float> launches(TorchTensor<float> a, float3 v, float3x3 m, half h, bool b, int64_t big)
{
    let blockCount = uint3(1);
    let groupSize = uint3(1, 1, 1);
    __dispatch_kernel(k1, blockCount, groupSize)(a, v, m, h, b, big);
    return a;
}

[TorchEntryPoint]
void synchronizes() { syncTorchCudaStream(); }
"""
ROWS = ((1.0, 2.0, 3.0), (4.0, 5.0, 6.0), (7.0, 8.0, 9.0))


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Loader:
    return Loader(cache_dir=tmp_path_factory.mktemp("slangtorch-host-cache"))


def _copy(tmp_path: Path, name: str, factor: str = "2.0") -> Path:
    """A slang-torch test file in a folder of its own, %FACTOR% filled in as test.py does."""
    for f in SLANG_TORCH.iterdir():
        if f.suffix in (".slang", ".cuh"):
            (tmp_path / f.name).write_text(f.read_text().replace("%FACTOR%", factor).replace("%CONST_VAL%", factor))
    return tmp_path / name


def _cpu(module: SlangTorchModule) -> HostLibrary:
    """The module's host code with its allocations on the CPU, so that it runs here."""
    assert module.host_library is not None
    return HostLibrary(module.host_library.path, module, device="cpu")


@pytest.mark.parametrize("name, entry_points", [
    ("smoke.slang", ("runCompute",)),
    ("multiply.slang", ("multiply",)),
    ("multiply_half.slang", ("multiply",)),
    ("import-module.slang", ("multiply",)),
    ("builtin-type-input.slang", ()),
    ("autobind-square-diff.slang", ()),
    ("autobind-multiply-struct.slang", ()),
])
def test_slang_torch_modules_host_code_builds_against_the_shim(tmp_path: Path, loader: Loader, name: str,
                                                                entry_points: tuple[str, ...]) -> None:
    m = slangtorch.loadModule(_copy(tmp_path, name), defines={"FACTOR": "2.0"}, loader=loader)
    assert m.entry_points == entry_points
    if entry_points:   # loadModule built it: those are the module's functions now
        assert m.host_library is not None and set(entry_points) <= set(m.host_library.functions)
        assert callable(getattr(m, entry_points[0]))
    else:              # [AutoPyBindCUDA] kernels are launched directly; their host wrappers build all the same
        assert m.host_library is None
        lib = HostLibrary(build_host_library(m.host_code, loader.cache_dir, name), m, device="cpu")
        assert set(m.kernels) <= set(lib.functions)
    declared = {k for k, _ in kernel_declarations(m.host_code)}
    assert declared and all(m.has_symbol(k) for k in declared)   # each kernel the host code may launch is in the CUDA code


def test_torch_entry_point_allocates_fills_and_returns_a_struct(tmp_path: Path, loader: Loader) -> None:
    (tmp_path / "host.slang").write_text(HOST)
    m = slangtorch.loadModule(tmp_path / "host.slang", loader=loader)
    grid, counts, like, scale, n, h = _cpu(m).call("allocate", (2, 3, 1.5, 0.25, torch.ones(4, 5)))
    assert grid.shape == (2, 3) and grid.dtype == torch.float32 and bool((grid == 1.5).all())
    assert counts.shape == (3,) and counts.dtype == torch.int32 and not counts.any()
    assert like.shape == (4, 5, 2) and like.dtype == torch.float16 and not like.any()
    assert (scale, n, h) == (3.0, 2 * 3 + 2, 0.5)
    assert "allocate" in repr(m.allocate) and "TorchTensor<float> other" in repr(m.allocate)


def test_calls_from_several_threads_keep_their_own_state(tmp_path: Path, loader: Loader) -> None:
    """Each call has its own tensors and callbacks (thread-local on both sides), in one library."""
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "host.slang").write_text(HOST)
    lib = _cpu(slangtorch.loadModule(tmp_path / "host.slang", loader=loader))

    def one(i: int) -> bool:
        grid, counts, like, scale, n, h = lib.call("allocate", (i % 5 + 1, 2, float(i), 1.0, torch.ones(1, i % 3 + 1)))
        return grid.shape == (i % 5 + 1, 2) and bool((grid == i).all()) and like.shape == (1, i % 3 + 1, 2)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, range(200)))


def test_vectors_matrices_arrays_and_nested_structs(tmp_path: Path, loader: Loader) -> None:
    """float3/float3x3/arrays/structs are tuples (rows for matrices), in and out; a tensor may stand for
    a vector or matrix; double, bool, int64 and int8 scalars; the host code of a launch with them builds."""
    (tmp_path / "more.slang").write_text(MORE)
    m = slangtorch.loadModule(tmp_path / "more.slang", loader=loader)
    assert m.entry_points == ("vec", "launches", "synchronizes") and m.kernels == ("k1",)
    vec = HostFunction(_cpu(m), "vec", m.vec.info)
    outer = (((1.0, 1.0, 1.0), 2), torch.ones(2), ROWS)
    want = (1 * 2 + 10 + 2, 2 * 2 + 20 + 2, 3 * 2 + (5 - 1) + 2)   # v * m[0][1] + (arr, big + small) + v' * k
    assert vec((1.0, 2.0, 3.0), ROWS, (10.0, 20.0), outer, 2.5, True, 5, -1) == want
    assert vec(torch.tensor([1.0, 2.0, 3.0]), torch.tensor(ROWS), torch.tensor([10.0, 20.0]), outer,
               torch.tensor(2.5), True, 5, -1) == want
    with pytest.raises(TypeError, match=r"vec\(\) argument 4 \(o\): expected a tuple of 3, got 2 items"):
        vec((1.0, 2.0, 3.0), ROWS, (10.0, 20.0), outer[:2], 2.5, True, 5, -1)


DISPATCH = """
[CudaKernel]
void k2(float3 v, float3x3 m, half h, bool b, int64_t big, float[2] arr)
{
    printf("%f\\n", v.x + m[0][1] + float(h) + (b ? 1.0 : 0.0) + float(big) + arr[1]);   // reads them all
}

[TorchEntryPoint]
void dispatches(float3 v, float3x3 m, half h, bool b, int64_t big, float[2] arr, uint n)
{
    let blockCount = uint3(n, 2, 1);
    let groupSize = uint3(32, 1, 1);
    __dispatch_kernel(k2, blockCount, groupSize)(v, m, h, b, big, arr);
}
"""


class RecordingLauncher:
    """Stands in for the GPU at the Launcher boundary: keeps each launch's argument bytes, as the
    kernel's parameter types size them, instead of launching."""

    def __init__(self, module: SlangTorchModule) -> None:
        self.module = module
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...], list[bytes]]] = []

    def launch(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], args: int,
               shared_mem: int, stream: int) -> None:
        self.module.host_args_for_kernel(kernel, args)   # as SlangTorchModule.launch does
        types = self.module.param_types(kernel)
        pointers = (ctypes.c_void_p * len(types)).from_address(args)
        self.launches.append((kernel, grid, block, [ctypes.string_at(p, t.size) for t, p in zip(types, pointers)]))

    def stream(self) -> int:
        return 0

    def sync(self, stream: int) -> None:
        pass


def test_a_dispatch_passes_the_bytes_the_kernel_takes(tmp_path: Path, loader: Loader) -> None:
    """What the host code hands `cudaLaunchKernel` is what our packer makes of the same Python values
    (the packer follows the kernel's own unpacking code), with the grid and block it computed."""
    (tmp_path / "dispatch.slang").write_text(DISPATCH)
    m = slangtorch.loadModule(tmp_path / "dispatch.slang", loader=loader)
    assert m.host_library is not None
    recorder = RecordingLauncher(m)
    values = ((1.0, 2.0, 3.0), ROWS, 0.5, True, -(2**40), (4.0, 5.0))
    assert HostLibrary(m.host_library.path, recorder, device="cpu").call("dispatches", (*values, 3)) is None
    [(kernel, grid, block, args)] = recorder.launches
    assert (kernel, grid, block) == ("k2", (3, 2, 1), (32, 1, 1))
    assert args == [pack(t, v, "x", lambda *_: b"") for t, v in zip(m.param_types("k2"), values)]
    # a module compiled row-major (a matrix too tall for column storage): the kernel reads a float3x3
    # transposed, and the host code's row-by-row matrices are moved before the launch
    (tmp_path / "tall.slang").write_text(
        DISPATCH.replace("bool b,", "bool b, matrix<float, 6, 2> t,", 1).replace("+ arr[1]", "+ arr[1] + t[5][1]")
        .replace("    __dispatch_kernel", "    matrix<float, 6, 2> t;\n    for (int i = 0; i < 6; i++)\n"
                 "        for (int j = 0; j < 2; j++) t[i][j] = 2.0 * i + j;\n    __dispatch_kernel")
        .replace("(v, m, h, b,", "(v, m, h, b, t,"))
    tall = slangtorch.loadModule(tmp_path / "tall.slang", loader=loader)
    assert tall.host_library is not None
    recorder = RecordingLauncher(tall)
    six = tuple((2.0 * i, 2.0 * i + 1) for i in range(6))
    values = (*values[:4], six, *values[4:])
    HostLibrary(tall.host_library.path, recorder, device="cpu").call("dispatches", (*values[:4], *values[5:], 1))
    [(_, _, _, args)] = recorder.launches
    types = tall.param_types("k2")
    assert args == [pack(t, v, "x", lambda *_: b"") for t, v in zip(types, values)]
    assert args[1] != pack(m.param_types("k2")[1], ROWS, "x", lambda *_: b"")   # the transposed storage


def test_struct_argument_as_a_list_reaches_the_tensor_checks(tmp_path: Path, loader: Loader) -> None:
    """smoke.slang's runCompute([X, 1.0]): the struct is read from the list, zerosLike allocates, and
    the generated code's own check refuses the CPU tensor, as a RuntimeError naming it."""
    m = slangtorch.loadModule(_copy(tmp_path, "smoke.slang"), loader=loader)
    with pytest.raises(RuntimeError, match=r"^outValues: tensor is not on CUDA device"):
        _cpu(m).call("runCompute", ([torch.zeros(2, 2), 1.0],))


def test_wrong_arguments_are_named(tmp_path: Path, loader: Loader) -> None:
    m = slangtorch.loadModule(_copy(tmp_path, "multiply.slang"), defines={"FACTOR": "2.0"}, loader=loader)
    lib = _cpu(m)
    with pytest.raises(TypeError, match=r"multiply\(\) argument 1 \(A\): expected a tensor, got a float"):
        lib.call("multiply", (1.0,), ("A",))
    with pytest.raises(TypeError, match=r"multiply\(\) takes 1 argument\(s\), got 2"):
        lib.call("multiply", (torch.ones(2, 2), torch.ones(2, 2)))
    with pytest.raises(TypeError, match=r"multiply\(\): unknown or repeated B; missing A"):
        m.multiply(B=torch.ones(2, 2))
    with pytest.raises(TypeError, match=r"a str cannot be passed to host code"):
        m.multiply("x")
    s = slangtorch.loadModule(_copy(tmp_path, "smoke.slang"), loader=loader)
    with pytest.raises(TypeError, match=r"runCompute\(\) argument 1: expected a tuple of 2, got 3 items"):
        _cpu(s).call("runCompute", ([torch.zeros(2, 2), 1.0, 2.0],))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where torch has no CUDA")
def test_without_cuda_a_call_says_so(tmp_path: Path, loader: Loader) -> None:
    m = slangtorch.loadModule(_copy(tmp_path, "multiply.slang"), defines={"FACTOR": "2.0"}, loader=loader)
    with pytest.raises(RuntimeError, match="torch has no CUDA device here"):
        m.multiply(torch.ones(2, 2))


def test_build_cache_and_a_failed_build(tmp_path: Path, loader: Loader) -> None:
    m = slangtorch.loadModule(_copy(tmp_path, "multiply.slang"), defines={"FACTOR": "2.0"}, loader=loader)
    assert m.host_library is not None
    built = m.host_library.path
    before = built.stat().st_mtime_ns
    assert build_host_library(m.host_code, loader.cache_dir, "again") == built   # a cache hit: not rebuilt
    assert built.stat().st_mtime_ns == before
    assert not [p for p in built.parent.iterdir() if p.name.startswith("build-")]   # no scratch folders left
    bad = m.host_code.replace("torch::Tensor multiply(", "torch::Tensor multiply(undeclared_t x, ", 1)
    with pytest.raises(HostBuildError, match=r"did not build .* the source is kept at (\S+):") as info:
        build_host_library(bad, loader.cache_dir, "multiply.slang")
    kept = Path(str(info.value).split("kept at ", 1)[1].split(":\n", 1)[0])
    assert "undeclared_t" in kept.read_text() and "undeclared_t" in str(info.value)
    with pytest.raises(HostBuildError, match=r"`/nonexistent/c\+\+ --version` failed .* install g\+\+ .* or set CXX"):
        build_host_library(m.host_code + "// new", loader.cache_dir, "multiply.slang", cxx="/nonexistent/c++")


# -- on a GPU: the kernels the host code dispatches run ----------------------------------------------

@pytest.mark.cuda
def test_torch_entry_points_launch_their_kernels(tmp_path: Path, loader: Loader) -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here (CPU-only torch or no GPU): host code dispatches CUDA kernels")
    m = slangtorch.loadModule(_copy(tmp_path, "multiply.slang"), defines={"FACTOR": "2.0"}, loader=loader)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    assert torch.equal(m.multiply(x).cpu(), torch.tensor([[2.0, 4.0], [6.0, 8.0]]))
    assert torch.equal(m.multiply(A=x).cpu(), torch.tensor([[2.0, 4.0], [6.0, 8.0]]))
    s = slangtorch.loadModule(_copy(tmp_path, "smoke.slang"), loader=loader)
    v0, v1 = s.runCompute([torch.zeros(2, 2, device="cuda"), 1.0])
    assert v0.shape == v1.shape == (2, 2) and bool((v1 == 1).all())
