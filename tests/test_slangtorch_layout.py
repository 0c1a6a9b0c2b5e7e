"""Kernel parameters packed in the layout the compiler's CUDA output declares, and the TensorView
checks (broadcast, dtype, device), without a GPU: tensors are packed by a stand-in TensorView packer."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

import slang_kernel.slangtorch as slangtorch
from slang_kernel.torch.slangtorch import Loader, SlangTorchModule
from slang_kernel.torch.slangtorch._layout import pack, reorder_rows
from slang_kernel.torch.slangtorch._views import BroadcastTensorError, tensor_view

SOURCE = """
struct MyStruct { float3x3 m; };
[PyExport("Foo")]
struct Foo { TensorView<float> A; TensorView<float> B; };

[AutoPyBindCUDA] [CUDAKernel] void vec(float3 input, TensorView<float> output) { }
[AutoPyBindCUDA] [CUDAKernel] void mat(float3x3 input, TensorView<float> output) { output[0] = input[0][1]; }
[AutoPyBindCUDA] [CUDAKernel] void st(MyStruct input, TensorView<float> output) { }
[AutoPyBindCUDA] [CUDAKernel] void arr(float3[3] input, TensorView<float> output) { }
[AutoPyBindCUDA] [CUDAKernel] void foo(Foo foo, TensorView<float> result) { }
[AutoPyBindCUDA] [CUDAKernel] [Differentiable] void sq(DiffTensorView input, DiffTensorView output) { }
"""
NINE = tuple(float(i) for i in range(1, 10))


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> SlangTorchModule:
    folder = tmp_path_factory.mktemp("layout")
    (folder / "layout.slang").write_text(SOURCE)
    return slangtorch.loadModule(folder / "layout.slang", loader=Loader(cache_dir=folder / "cache"))


def _tensor(value: Any, where: str) -> bytes:
    """Stand-in TensorView: 56 bytes naming the tensor, so offsets can be checked."""
    return f"{where}:{value}".encode().ljust(56, b"\0")


def _pack(module: SlangTorchModule, kernel: str, index: int, value: Any) -> bytes:
    return pack(module.param_types(f"__kernel__{kernel}")[index], value, "input", _tensor)


def test_vectors_matrices_arrays_and_struct_of_matrix(module: SlangTorchModule) -> None:
    assert _pack(module, "vec", 0, (1.0, 2.0, 3.0)) == struct.pack("<3f", 1, 2, 3)
    rows = (NINE[0:3], NINE[3:6], NINE[6:9])
    assert _pack(module, "mat", 0, rows) == struct.pack("<9f", *NINE)
    assert _pack(module, "st", 0, module.MyStruct(m=rows)) == struct.pack("<9f", *NINE)
    assert _pack(module, "st", 0, {"m": rows}) == struct.pack("<9f", *NINE)
    assert _pack(module, "arr", 0, list(rows)) == struct.pack("<9f", *NINE)


def test_matrix_storage_is_read_row_by_row(module: SlangTorchModule) -> None:
    """Python gives a float3x3 as rows and it is packed row after row: the kernel must read it so
    (slangc's default layout; the session's row-major default made the kernel read it transposed)."""
    import re

    first_row = r"makeMatrix<float, 3, 3> \((\w+)->(\w+)\[int\(0\)\], \1->\2\[int\(1\)\], \1->\2\[int\(2\)\]"
    assert re.search(first_row, module.code)


def test_tall_matrices_compile_row_major_and_matrices_are_packed_as_the_kernel_reads_them(tmp_path: Path) -> None:
    """matrix<float, 6, 2> is invalid column-major (slang-torch's Bezier example has one): such a module
    is compiled row-major, where Slang's kernels read a float3x3's storage transposed; the packer
    follows the kernel's own unpacking code."""
    (tmp_path / "tall.slang").write_text(
        "struct S { float a; float3x3 m; };\n"
        "[AutoPyBindCUDA] [CUDAKernel] void tall(matrix<float, 6, 2> t, float3x3 m, S s, float3x3[2] ms,"
        " TensorView<float> o) { o[0] = t[5][1] + m[0][1] + s.m[1][2] + ms[1][2][0]; }")
    m = slangtorch.loadModule(tmp_path / "tall.slang", loader=Loader(cache_dir=tmp_path / "cache"))
    tall, square = m.param_types("__kernel__tall")[:2]
    rows = (NINE[0:3], NINE[3:6], NINE[6:9])
    assert pack(square, rows, "m", _tensor) == struct.pack("<9f", *(NINE[i + 3 * j] for i in range(3) for j in range(3)))
    assert sorted(tall.order) == list(range(12))
    packed = struct.unpack("<12f", pack(tall, [(2.0 * i, 2.0 * i + 1) for i in range(6)], "t", _tensor))
    assert [packed[slot] for slot in tall.order] == [float(k) for k in range(12)]
    # host code ([TorchEntryPoint] -> __dispatch_kernel) packs matrices row by row: moved before the launch
    s_type, ms_type = m.param_types("__kernel__tall")[2:4]
    for t, value, flat in ((square, rows, NINE), (s_type, (0.5, rows), (0.5, *NINE)), (ms_type, [rows, rows], NINE * 2)):
        host = bytearray(b"".join(struct.pack("<f", x) for x in flat))
        reorder_rows(t, host)
        assert bytes(host) == pack(t, value, "x", _tensor) != b"".join(struct.pack("<f", x) for x in flat)


def test_every_scalar_type_slangs_cuda_output_names(tmp_path: Path) -> None:
    """int8..uint64, half, double, bool and small vectors of them, as Slang's CUDA code spells them
    (char, ushort, longlong, __half, ...), pack to their C sizes."""
    (tmp_path / "scalars.slang").write_text(
        "[CudaKernel] void k(int8_t a, uint8_t b, int16_t c, uint16_t d, int e, uint f, int64_t g, uint64_t h,"
        " half i, float j, double k, bool l, half3 m, int2 n) { }")
    m = slangtorch.loadModule(tmp_path / "scalars.slang", loader=Loader(cache_dir=tmp_path / "cache"))
    sizes = [t.size for t in m.param_types("k")]
    assert sizes == [1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8, 1, 6, 8]
    values = [-1, 255, -2, 65535, -3, 7, -(2**40), 2**63, 0.5, 1.5, 2.5, True, (1.0, 2.0, 3.0), (4, 5)]
    assert pack(m.param_types("k")[12], values[12], "m", _tensor) == struct.pack("<3e", 1, 2, 3)
    assert [pack(t, v, "x", _tensor) for t, v in zip(m.param_types("k"), values)][6] == struct.pack("<q", -(2**40))


def test_struct_by_tuple_dict_namedtuple_and_wrong_fields(module: SlangTorchModule) -> None:
    want = _tensor("a", "input.A") + _tensor("b", "input.B")
    assert _pack(module, "foo", 0, ("a", "b")) == want
    assert _pack(module, "foo", 0, {"A": "a", "B": "b"}) == want
    assert _pack(module, "foo", 0, module.Foo(A="a", B="b")) == want
    for bad in (("a",), ("a", "b", "a"), {"A": "a"}, {"A": "a", "Ba": "b"}):
        with pytest.raises(TypeError, match="struct Foo"):
            _pack(module, "foo", 0, bad)


def test_diff_tensor_view_pairs(module: SlangTorchModule) -> None:
    want = _tensor("x", "input") + _tensor("dx", "input.grad")
    assert _pack(module, "sq", 0, ("x", "dx")) == want
    assert _pack(module, "sq", 0, module.DiffTensorView(value="x", grad="dx")) == want
    assert module.has_symbol("__kernel__sq_bwd_diff")


def test_tensor_views_refuse_broadcast_wrong_dtype_and_cpu() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(BroadcastTensorError, match=r"`input` is broadcast .*input\.contiguous\(\)"):
        tensor_view(torch.ones(1, 4).expand(3, 4), "input")
    with pytest.raises(TypeError, match=r"float64.*TensorView<float>"):
        tensor_view(torch.ones(4, dtype=torch.float64), "input", "float")
    with pytest.raises(TypeError, match=r"on cpu.*input\.cuda\(\)"):   # requires_grad: read via .detach()
        tensor_view(torch.ones(4, requires_grad=True), "input", "float")
    assert len(tensor_view(torch.ones(0), "input", "float")) == 56   # empty tensors pass anywhere


def test_missing_and_unknown_arguments_are_named(module: SlangTorchModule, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"vec\(\): missing output; unknown outptu"):
        module.vec(input=(1.0, 2.0, 3.0), outptu=None)
