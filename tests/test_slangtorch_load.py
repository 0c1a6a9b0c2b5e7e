"""slang_kernel.slangtorch's loader without a GPU: kernels from the compiler's output, imports and
include paths, defines, the build cache key, errors with file and line (slang-torch's suite runs on
the GPU machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

import slang_kernel.slangtorch as slangtorch
from slang_kernel.torch.slangtorch import Loader, ModuleSource

MULTIPLY = """
float computeOutputValue(TensorView<float> A, uint2 loc) { return A[loc] * FACTOR; }
"""

KERNELS = """
import helper;

[AutoPyBindCUDA]
[CUDAKernel]
[Differentiable]
void square(
    DiffTensorView input,
    DiffTensorView output)
{
    uint3 i = cudaThreadIdx() + cudaBlockIdx() * cudaBlockDim();
    if (i.x >= input.size(0))
        return;
    output[i.x] = input[i.x] * input[i.x];
}

[CUDAKernel]
void mul_kernel(TensorView<float> A, TensorView<float> result)
{
    uint2 loc = (cudaBlockDim() * cudaBlockIdx() + cudaThreadIdx()).xy;
    result[loc] = computeOutputValue(A, loc);
}

struct Foo { TensorView<float> A; float3x3 m; };

[AutoPyBindCUDA]
[CUDAKernel]
void takes_struct(Foo foo, float3 v, float3[2] arr, TensorView<half> out)
{
}
"""


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Loader:
    return Loader(cache_dir=tmp_path_factory.mktemp("slangtorch-cache"))


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_kernels_come_from_the_compiler_not_the_text(tmp_path: Path, loader: Loader) -> None:
    """A parameter on its own line is not a kernel; [AutoPyBindCUDA] kernels get .fwd/.bwd."""
    _write(tmp_path, "helper.slang", MULTIPLY.replace("FACTOR", "2.0"))
    path = _write(tmp_path, "kernels.slang", KERNELS)
    m = slangtorch.loadModule(path, loader=loader)
    assert set(m.kernels) == {"square", "mul_kernel", "takes_struct"}
    assert m.has_symbol("__kernel__square_bwd_diff") and m.has_symbol("__kernel__square_fwd_diff")
    assert m.Foo._fields == ("A", "m")
    with pytest.raises(TypeError, match=r"needs \[Differentiable\]"):
        m.mul_kernel.fwd(A=None, result=None)
    with pytest.raises(AttributeError, match="kernels: "):
        m.DiffTensorViewX


def test_imports_resolve_from_the_files_folder_then_include_paths(tmp_path: Path, loader: Loader) -> None:
    main = _write(tmp_path / "a", "main.slang", KERNELS)
    with pytest.raises(RuntimeError, match=r"main\.slang:2"):     # helper is in neither folder yet
        slangtorch.loadModule(main, loader=loader)
    _write(tmp_path / "b", "helper.slang", MULTIPLY.replace("FACTOR", "2.0"))
    m = slangtorch.loadModule(main, includePaths=[tmp_path / "b"], loader=loader)
    assert "mul_kernel" in m.kernels


def test_a_changed_imported_file_rebuilds(tmp_path: Path, loader: Loader) -> None:
    _write(tmp_path, "helper.slang", MULTIPLY.replace("FACTOR", "2.0"))
    path = _write(tmp_path, "kernels.slang", KERNELS)
    first = slangtorch.loadModule(path, loader=loader)
    assert slangtorch.loadModule(path, loader=loader) is first      # unchanged: the loaded module
    _write(tmp_path, "helper.slang", MULTIPLY.replace("FACTOR", "1.0"))
    second = slangtorch.loadModule(path, loader=loader)
    assert second is not first and "2.0" in first.code and "2.0" not in second.code


def test_a_changed_cuda_prelude_changes_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "k.slang", "[CUDAKernel] void k(TensorView<float> o) { }")
    header = _write(tmp_path, "prelude.cuh", "__device__ float c() { return 2.0f; }")
    before = ModuleSource.of(path, {}, []).dependencies_digest()
    header.write_text("__device__ float c() { return 1.0f; }")
    assert ModuleSource.of(path, {}, []).dependencies_digest() != before


def test_defines_and_a_missing_define(tmp_path: Path, loader: Loader) -> None:
    path = _write(tmp_path, "multiply.slang", "static const float kFactor = FACTOR;\n"
                  "[AutoPyBindCUDA] [CUDAKernel] void mul(TensorView<float> A) { A[0] = A[0] * kFactor; }")
    with pytest.raises(RuntimeError, match=r"multiply\.slang:1:30: error .*FACTOR"):
        slangtorch.loadModule(path, loader=loader)
    two = slangtorch.loadModule(path, defines={"FACTOR": "2.0"}, loader=loader)   # nothing half-loaded
    one = slangtorch.loadModule(path, defines={"FACTOR": 1.0}, loader=loader)
    assert two is not one and two.kernels == one.kernels == ("mul",)


def test_defines_reach_imported_files(tmp_path: Path, loader: Loader) -> None:
    """As slangc's -D: slang-torch's inline-MLP example defines WARP_SIZE for the file it imports."""
    _write(tmp_path, "helper.slang", MULTIPLY)   # uses FACTOR, defined only by the loadModule call
    path = _write(tmp_path, "kernels.slang", KERNELS)
    m = slangtorch.loadModule(path, defines={"FACTOR": "3.5"}, loader=loader)
    assert "3.5" in m.code and "mul_kernel" in m.kernels


def test_every_slangtorch_keyword_is_accepted(tmp_path: Path, loader: Loader) -> None:
    path = _write(tmp_path, "k.slang", "[AutoPyBindCUDA] [CUDAKernel] void k(TensorView<float> o) { }")
    m = slangtorch.loadModule(path, skipSlang=False, verbose=False, defines={}, includePaths=[],
                              skipNinjaCheck=True, slangGenLineInfo=False, cudaFastMath=False,
                              cudaGenLineInfo=False, extraSlangFlags=[], extraCudaFlags=[], loader=loader)
    assert m.kernels == ("k",)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.slang"):
        slangtorch.loadModule(tmp_path / "nope.slang")


def test_torch_entry_points_are_the_modules_functions(tmp_path: Path, loader: Loader) -> None:
    """[TorchEntryPoint] functions come from the torch-binding code (tests/test_slangtorch_host.py runs them)."""
    path = _write(tmp_path, "entry.slang", """
[CudaKernel]
void mul_kernel(TensorView<float> A, TensorView<float> result) { result[uint2(0, 0)] = A[uint2(0, 0)]; }

[TorchEntryPoint]
TorchTensor<float> multiply(TorchTensor<float> A)
{
    var result = TorchTensor<float>.zerosLike(A);
    let blockCount = uint3(1);
    let groupSize = uint3(A.size(0), A.size(1), 1);
    __dispatch_kernel(mul_kernel, blockCount, groupSize)(A, result);
    return result;
}""")
    m = slangtorch.loadModule(path, loader=loader)
    assert m.kernels == ("mul_kernel",) and m.entry_points == ("multiply",)
    assert "TorchTensor<float> multiply(TorchTensor<float> A)" in repr(m.multiply)
    with pytest.raises(AttributeError, match=r"\[TorchEntryPoint\] functions: multiply"):
        m.multiplY
