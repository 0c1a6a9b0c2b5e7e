"""Session(checked=True) on every backend (`--backends`): the same out-of-range kernels give the same
BoundsError (kernel, parameter, index, size; the same text), out-of-range writes are dropped and reads
give 0, in-range results are written back. CPU and CUDA check through the bound-check hooks of their
preludes, Vulkan through an instrumented variant of the kernel's cell (backends/vulkan/bounds_slang.py). The CPU
backend checks alike in its worker process and in-process (isolate=False); unchecked, it drops
out-of-range accesses and warns."""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends.vulkan.bounds_slang import checked_paths, checked_variant

OOB = """
[shader("compute")][numthreads(64, 1, 1)]
void oob_write(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> dst,
               uniform StructuredBuffer<float> src, uniform uint shift)
{ dst[t.x + shift] = src[t.x]; }

[shader("compute")][numthreads(64, 1, 1)]
void oob_read(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> dst,
              uniform StructuredBuffer<float> src, uniform uint shift)
{ dst[t.x] = src[t.x + shift] + 1; }

struct Holder { RWStructuredBuffer<float> inner; float k; };
[shader("compute")][numthreads(64, 1, 1)]
void oob_nested(uint3 t: SV_DispatchThreadID, uniform Holder h, uniform uint shift)
{ h.inner[t.x + shift] = h.k; }

[shader("compute")][numthreads(64, 1, 1)]
void oob_bytes(uint3 t: SV_DispatchThreadID, uniform RWByteAddressBuffer raw, uniform uint shift)
{ raw.Store((t.x + shift) * 4, t.x + 1); }

RWStructuredBuffer<int> counts;
[shader("compute")][numthreads(8, 8, 1)]
void oob_global(uint3 t: SV_DispatchThreadID, uniform uint width)
{ counts[t.y * width + t.x] = int(t.x + 100 * t.y); }
"""


@pytest.fixture(scope="module")
def checked(backend_name: str, open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    with open_session(backend_name, checked=True) as s:
        s.run_cell(OOB, name="oob")
        yield s


def _cpu_text(kernel: str, count: int, index: int, size: int, buffer: str) -> str:
    return str(sk.BoundsError(kernel, count, index, size, buffer))


def test_one_write_past_the_end(checked: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    src = np.arange(64, dtype=np.float32) + 1
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("oob_write")(threads=64, dst=dst, src=src, shift=1)
    e = info.value
    assert str(e) == _cpu_text("oob_write", 1, 64, 64, "dst")   # the CPU backend's text, word for word
    assert (e.kernel, e.buffer, e.index, e.size, e.count) == ("oob_write", "dst", 64, 64, 1)
    if checked.backend.name != "cpu":
        assert e.thread == (63, 0, 0)
    np.testing.assert_array_equal(dst, np.r_[0, src[:63]])   # in range written, the one past the end dropped


def test_many_writes_are_counted_and_dropped(checked: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    canary = np.full(256, 7, np.float32)   # a neighbour that a stray write would hit
    with pytest.raises(sk.BoundsError, match=r"oob_write: 10 out-of-range access\(es\).* of `dst` \(64 elements\)") as info:
        checked.kernel("oob_write")(threads=64, dst=dst, src=np.arange(64, dtype=np.float32), shift=10)
    assert 64 <= info.value.index < 74
    if checked.backend.name != "cpu":
        assert info.value.thread is not None and info.value.thread[0] + 10 == info.value.index
    np.testing.assert_array_equal(dst[10:], np.arange(54))
    checked.kernel("oob_read")(threads=64, dst=canary[:64], src=canary, shift=0)   # in range: no error
    assert (canary[64:] == 7).all()


def test_reads_past_the_end_give_zero(checked: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    src = np.arange(64, dtype=np.float32)
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("oob_read")(threads=64, dst=dst, src=src, shift=3)
    assert (info.value.buffer, info.value.count, info.value.index, info.value.size) == ("src", 3, 64, 64)
    assert str(info.value) == _cpu_text("oob_read", 3, 64, 64, "src")
    np.testing.assert_array_equal(dst, np.r_[np.arange(3, 64), [0, 0, 0]] + 1)


def test_buffer_inside_a_struct_parameter(checked: sk.Session) -> None:
    inner = np.zeros(32, np.float32)
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("oob_nested")(threads=64, h={"inner": inner, "k": 5.0}, shift=0)
    assert (info.value.buffer, info.value.size, info.value.count) == ("h.inner", 32, 32)
    assert (inner == 5).all()


def test_byte_address_buffer(checked: sk.Session) -> None:
    raw = np.zeros(16, np.uint32)
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("oob_bytes")(threads=64, raw=raw, shift=0)
    e = info.value
    assert (e.buffer, e.count, e.size) == ("raw", 48, 16) and 16 <= e.index < 64   # in 4-byte words
    np.testing.assert_array_equal(raw, np.arange(1, 17))


def test_global_buffer_2d_dispatch(checked: sk.Session) -> None:
    counts = np.zeros(60, np.int32)   # 8x8 threads, 60 elements: the last 4 threads of row 7 are out
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("oob_global")(threads=(8, 8), counts=counts, width=8)
    e = info.value
    assert (e.buffer, e.size, e.count) == ("counts", 60, 4) and 60 <= e.index < 64
    if checked.backend.name != "cpu":
        assert e.thread is not None and e.thread[1] == 7 and e.thread[0] == e.index - 56
    expect = (np.arange(64) % 8 + 100 * (np.arange(64) // 8))[:60]
    np.testing.assert_array_equal(counts, expect)


def test_in_range_runs_clean(checked: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    checked.kernel("oob_write")(threads=64, dst=dst, src=np.ones(64, np.float32), shift=0)
    assert (dst == 1).all()


@pytest.mark.vulkan
def test_auto_backend_keeps_checking(cache_dir: str) -> None:
    """backend="auto" picks Vulkan where a driver is installed (lavapipe too): checked=True still checks."""
    with sk.Session(cache_dir=cache_dir, checked=True) as s:
        if s.backend.name == "cpu":
            pytest.skip("auto picked the CPU here (no Vulkan driver)")
        s.run_cell(OOB, name="oob")
        with pytest.raises(sk.BoundsError, match="`dst`"):
            s.kernel("oob_write")(threads=64, dst=np.zeros(64, np.float32), src=np.zeros(64, np.float32), shift=1)


def test_variant_rewrites_only_the_kernels_accesses(cpu_session: sk.Session) -> None:
    """The instrumented text: each buffer access of the entry's parameters goes through sk_chk_,
    comments and strings are left alone, and lines keep their numbers."""
    cpu_session.run_cell(OOB + "\n// h.inner[0] in a comment\n", name="oob_text")
    ck = cpu_session.kernel("oob_nested").compiled()
    assert [p for p, _ in checked_paths(ck)] == ["h.inner", "counts"]   # uniforms, then globals
    v = checked_variant(ck)
    text = v.kernel.chain[-1].source if v.kernel.chain else ""
    assert "h.inner[sk_chk_(h.inner, t.x + shift, 0u)]" in text
    assert "// h.inner[0] in a comment" in text
    assert v.kernel.key == ck.key + "/chk/checked" and v.paths == ("h.inner", "counts") and v.threads
    user = ck.chain[-1].source
    assert text.splitlines()[:len(user.splitlines())][-2] == user.splitlines()[-2]


TEX = """
[shader("compute")][numthreads(8, 8, 1)]
void tex_shift(uint3 t: SV_DispatchThreadID, uniform RWTexture2D<float> img, uniform Texture2D<float> src, uniform int dx)
{ img[int2(t.xy) + int2(dx, 0)] = src[t.xy] + 1; }
"""


def test_texture_coordinates_out_of_range(checked: sk.Session) -> None:
    """Vulkan checks texture accesses too (each coordinate against that axis's size); the CPU and CUDA
    backends check buffers only."""
    if checked.backend.name != "vulkan":
        pytest.skip(f"texture accesses are checked on Vulkan only (the {checked.backend.name} backend's "
                    "bound-check hooks cover buffers)")
    checked.run_cell(TEX, name="tex")
    img = np.zeros((8, 8, 1), np.float32)
    src = np.arange(64, dtype=np.float32).reshape(8, 8, 1)
    with pytest.raises(sk.BoundsError) as info:
        checked.kernel("tex_shift")(threads=(8, 8), img=img, src=src, dx=2)
    e = info.value
    assert (e.buffer, e.count, e.index, e.size) == ("img", 16, 8, 8)
    assert e.thread is not None and e.thread[0] in (6, 7)
    np.testing.assert_array_equal(img[:, 2:, 0], src[:, :6, 0] + 1)   # in range written
    assert (img[:, :2] == 0).all()


SHADOW = """
RWStructuredBuffer<float> data;
float pick(float data[4], int i) { return data[i & 3]; }   // a local named like the global buffer
[shader("compute")][numthreads(8, 1, 1)]
void shadowed(uint3 t: SV_DispatchThreadID, uniform uint shift)
{ float a[4] = { 1, 2, 3, 4 }; data[t.x + shift] = pick(a, int(t.x)); }
"""


@pytest.mark.vulkan
@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
def test_vulkan_variant_falls_back_to_the_entry_body(isolate: bool, open_session: Callable[..., sk.Session]) -> None:
    """Where the whole-cell rewrite does not compile (a helper's local array named like a buffer
    parameter), the entry point's own accesses are still checked; in-process as in the worker."""
    s = open_session("vulkan", checked=True, isolate=isolate)
    with s:
        s.run_cell(SHADOW, name="shadow")
        data = np.zeros(8, np.float32)
        with pytest.raises(sk.BoundsError) as info:
            s.kernel("shadowed")(threads=8, data=data, shift=2)
        assert (info.value.buffer, info.value.count, info.value.size) == ("data", 2, 8)
        np.testing.assert_array_equal(data, [0, 0, 1, 2, 3, 4, 1, 2])
        s.run_cell(OOB, name="oob")
        dst = np.zeros(64, np.float32)
        with pytest.raises(sk.BoundsError, match="`dst`") as info:
            s.kernel("oob_write")(threads=64, dst=dst, src=np.ones(64, np.float32), shift=1)
        assert info.value.thread == (63, 0, 0)


def test_profile_and_debug_in_a_checked_session(checked: sk.Session) -> None:
    """profile() times the kernel as written; debug() runs the thread debugger's build, checked too."""
    checked.run_cell('import debug;\n[shader("compute")][numthreads(64, 1, 1)]\n'
                     'void dbg_oob(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> dst, uniform uint shift)\n'
                     '{ debug_value("x", float(t.x)); dst[t.x + shift] = 1; }', name="dbg_oob")
    dst = np.zeros(64, np.float32)
    k = checked.kernel("dbg_oob")
    assert k.profile(threads=64, dst=dst, shift=0).run_ms >= 0
    assert float(k.debug((5, 0, 0), threads=64, dst=dst, shift=0).values["x"]) == 5.0
    with pytest.raises(sk.BoundsError, match="`dst`"):   # the debug build is checked as well
        k.debug((5, 0, 0), threads=64, dst=dst, shift=1)


# -- the CPU backend, in its worker process and in-process ------------------------------------------

LOCAL = """
[shader("compute")][numthreads(1, 1, 1)]
void oob_local(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> dst, uniform uint i)
{ float a[4] = { 1, 2, 3, 4 }; a[i] = 9; dst[0] = a[i % 4] + a[0]; }
"""


@pytest.fixture(scope="module", params=[True, False], ids=["worker", "in-process"])
def checked_cpu(request: pytest.FixtureRequest,
                open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    """A checked CPU session, isolated (kernels in the worker) and not: both check alike, local arrays too."""
    s = open_session("cpu", checked=True, isolate=request.param)
    s.run_cell(OOB, name="oob")
    s.run_cell(LOCAL, name="local")
    yield s
    s.close()


def test_bounds_error_names_kernel_buffer_and_index(checked_cpu: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    src = np.arange(64, dtype=np.float32)
    with pytest.raises(sk.BoundsError) as info:
        checked_cpu.kernel("oob_write")(threads=64, dst=dst, src=src, shift=10)
    e = info.value
    assert (e.kernel, e.buffer, e.size, e.count) == ("oob_write", "dst", 64, 10)
    assert 64 <= e.index < 74
    assert "oob_write" in str(e) and "`dst`" in str(e) and "64 elements" in str(e)
    np.testing.assert_array_equal(dst[10:], src[:54])   # in-range writes happened
    assert (dst[:10] == 0).all()


def test_bounds_error_on_a_read(checked_cpu: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    src = np.arange(64, dtype=np.float32)
    with pytest.raises(sk.BoundsError, match=r"oob_read: 3 out-of-range.* of `src` \(64 elements\)") as info:
        checked_cpu.kernel("oob_read")(threads=64, dst=dst, src=src, shift=3)
    assert info.value.buffer == "src"
    np.testing.assert_array_equal(dst, np.r_[np.arange(3, 64), [0, 0, 0]] + 1)  # reads past the end gave 0


def test_bounds_error_byte_address_and_nested(checked_cpu: sk.Session) -> None:
    raw = np.zeros(16, np.uint32)
    with pytest.raises(sk.BoundsError) as info:
        checked_cpu.kernel("oob_bytes")(threads=64, raw=raw, shift=0)
    assert info.value.buffer == "raw" and info.value.count == 48
    np.testing.assert_array_equal(raw, np.arange(1, 17))
    inner = np.zeros(32, np.float32)
    with pytest.raises(sk.BoundsError) as info:
        checked_cpu.kernel("oob_nested")(threads=64, h={"inner": inner, "k": 5.0}, shift=0)
    assert info.value.buffer == "h.inner" and info.value.size == 32
    assert (inner == 5).all()


def test_bounds_error_local_array(checked_cpu: sk.Session) -> None:
    dst = np.zeros(1, np.float32)
    checked_cpu.kernel("oob_local")(threads=1, dst=dst, i=2)
    assert dst[0] == 10
    with pytest.raises(sk.BoundsError, match="a local array"):
        checked_cpu.kernel("oob_local")(threads=1, dst=dst, i=1000)


def test_in_range_kernels_pass_checked(checked_cpu: sk.Session) -> None:
    dst = np.zeros(64, np.float32)
    checked_cpu.kernel("oob_write")(threads=64, dst=dst, src=np.ones(64, np.float32), shift=0)
    assert (dst == 1).all()


def test_unchecked_drops_out_of_range_and_warns(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell(OOB, name="oob")
    dst = np.zeros(64, np.float32)
    canary = np.full(1 << 16, 7, np.float32)
    with pytest.warns(sk.OutOfRangeWarning, match=r"oob_write: 64 out-of-range access\(es\).*`dst`"):
        s.kernel("oob_write")(threads=64, dst=dst, src=np.arange(64, dtype=np.float32), shift=1 << 20)
    raw = np.zeros(4, np.uint32)
    with pytest.warns(sk.OutOfRangeWarning, match="oob_bytes"):
        s.kernel("oob_bytes")(threads=64, raw=raw, shift=1 << 20)
    assert (dst == 0).all() and (raw == 0).all() and (canary == 7).all()
