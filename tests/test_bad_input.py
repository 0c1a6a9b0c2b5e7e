"""Bad input from Python gets a clear error naming the parameter, and leaves no partial state:
the arrays passed are untouched and the next good call works. Runs on every backend (--backends)."""

from __future__ import annotations

import re
import warnings

from typing import Any

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends.common.packing import ParameterError

CELL = """
struct BadInputParams { float scale; int offset; float2 shift; };

[shader("compute")][numthreads(16, 1, 1)]
void bad_input(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
               uniform StructuredBuffer<float> x, uniform StructuredBuffer<float3> v,
               uniform BadInputParams p, uniform uint n)
{
    if (t.x < n) o[t.x] = x[t.x] * p.scale + float(p.offset) + v[t.x].z + p.shift.y;
}
"""
N = 16


@pytest.fixture(scope="module")
def kern(session: sk.Session) -> sk.ComputeKernel:
    session.run_cell(CELL, name="bad_input_cell")
    return session.kernel("bad_input")


def good() -> dict:
    return dict(o=np.zeros(N, np.float32), x=np.arange(N, dtype=np.float32), v=np.ones((N, 3), np.float32),
                p={"scale": 2.0, "offset": 1, "shift": (0.0, 0.5)}, n=N)


def expected(args: dict) -> np.ndarray:
    return np.arange(N, dtype=np.float32) * 2 + 1 + 1 + 0.5


def run_ok(kern: sk.ComputeKernel) -> None:
    args = good()
    kern(threads=N, **args)
    np.testing.assert_allclose(args["o"], expected(args))


def ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


CASES = {
    # name: (changes to the good arguments, exception type, message regex)
    "rw-wrong-dtype": ({"o": np.zeros(N, np.float64)}, ParameterError, r"`o`.*float64"),
    "rw-int-dtype": ({"o": np.zeros(N, np.int32)}, ParameterError, r"`o`.*int32"),
    "rw-read-only": ({"o": ro(np.zeros(N, np.float32))}, ParameterError, r"`o`.*read-only"),
    "rw-not-contiguous": ({"o": np.zeros(2 * N, np.float32)[::2]}, ParameterError, r"`o`.*not C-contiguous"),
    "rw-fortran-2d": ({"o": np.zeros((4, 4), np.float32, order="F")[:, :3]}, ParameterError, r"`o`"),
    "rw-list": ({"o": [0.0] * N}, ParameterError, r"`o`.*numpy array"),
    "rw-scalar": ({"o": 3.0}, ParameterError, r"`o`"),
    "ro-complex": ({"x": np.zeros(N, np.complex64)}, ParameterError, r"`x`"),
    "ro-strings": ({"x": np.array(["a"] * N)}, ParameterError, r"`x`"),
    "ro-object": ({"x": object()}, ParameterError, r"`x`"),
    "vector-wrong-trailing-shape": ({"v": np.ones((N, 4), np.float32)}, ParameterError, r"`v`.*trailing shape"),
    "vector-flat": ({"v": np.ones(N, np.float32)}, ParameterError, r"`v`.*trailing shape"),
    "struct-missing-field": ({"p": {"scale": 2.0, "offset": 1}}, ParameterError, r"`p`.*missing shift"),
    "struct-extra-field": ({"p": {"scale": 2.0, "offset": 1, "shift": (0, 0), "bogus": 1}}, ParameterError,
                           r"`p`.*unknown bogus"),
    "struct-wrong-field-type": ({"p": {"scale": "big", "offset": 1, "shift": (0, 0)}}, ParameterError, r"`p.scale`"),
    "struct-wrong-vector-length": ({"p": {"scale": 2.0, "offset": 1, "shift": (0, 0, 0)}}, ParameterError,
                                   r"`p.shift` is float2"),
    "struct-float-for-int": ({"p": {"scale": 2.0, "offset": 1.5, "shift": (0, 0)}}, ParameterError, r"`p.offset`"),
    "struct-not-a-struct": ({"p": 3.0}, ParameterError, r"`p` is struct BadInputParams"),
    "scalar-string": ({"n": "sixteen"}, ParameterError, r"`n` is uint"),
    "scalar-array": ({"n": np.arange(3)}, ParameterError, r"`n` is uint"),
    "scalar-none": ({"n": None}, ParameterError, r"`n` is uint"),
    "scalar-complex": ({"n": 1j}, ParameterError, r"`n` is uint"),
}


# Cases whose message says what the parameter needs but has no code to run (the value carries nothing
# a program could turn into the right one: a string for a number, a missing struct field...).
NO_CODE_ADVICE = {"ro-complex", "ro-strings", "ro-object", "vector-wrong-trailing-shape", "vector-flat",
                  "struct-missing-field", "struct-extra-field", "struct-wrong-field-type",
                  "struct-wrong-vector-length", "struct-float-for-int", "struct-not-a-struct", "scalar-string",
                  "scalar-array", "scalar-none", "scalar-complex"}


def advice_code(message: str) -> list[str]:
    """The statements a message tells the user to run: its backticked snippets that assign."""
    return [c for c in re.findall(r"`([^`]+)`", message) if re.match(r"^\w+ = ", c)]


def follow_advice(kern: sk.ComputeKernel, args: dict, message: str) -> dict:
    """Do what the message says, word for word: run its code with the user's names (the arguments as
    passed, and numpy as np), then call again with the names it rebound."""
    code = advice_code(message)
    assert code, f"no code to run in: {message}"
    names: dict = {"np": np, **args}
    for line in code:
        exec(line, names)
    retried = {k: names[k] for k in args}
    kern(threads=N, **retried)
    return retried


@pytest.mark.parametrize("case", list(CASES))
def test_bad_value_is_a_clear_error_and_changes_nothing(kern: sk.ComputeKernel, case: str) -> None:
    change, exc, pattern = CASES[case]
    args = good()
    args.update(change)
    before = {k: v.copy() for k, v in args.items() if isinstance(v, np.ndarray)}
    with pytest.raises(exc, match=pattern) as info:
        kern(threads=N, **args)
    for k, v in before.items():
        np.testing.assert_array_equal(args[k], v)   # nothing was written
    run_ok(kern)
    if case in NO_CODE_ADVICE:
        assert advice_code(str(info.value)) == []
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sk.OutOfRangeWarning)   # the advice keeps a short buffer short
        retried = follow_advice(kern, args, str(info.value))
    out = np.ravel(retried["o"])[:N]
    np.testing.assert_allclose(out, expected(args)[:out.size])   # the advice worked: the kernel wrote there


def test_missing_and_extra_parameters(kern: sk.ComputeKernel) -> None:
    args = good()
    del args["x"]
    with pytest.raises(TypeError, match=r"missing `x` \(StructuredBuffer<float>\)") as info:
        kern(threads=N, **args)
    assert "Its parameters:" in str(info.value) and "`n` (uint)" in str(info.value)
    args = good()
    args["oops"] = 1
    with pytest.raises(TypeError, match="unknown `oops`"):
        kern(threads=N, **args)
    args = good()
    o = args["o"]
    with pytest.raises(TypeError, match="missing `n`.*unknown `N`"):
        kern(threads=N, **{k: v for k, v in args.items() if k != "n"}, N=N)
    assert (o == 0).all()
    run_ok(kern)


@pytest.mark.parametrize("launch", [dict(), dict(threads=N, groups=1), dict(threads=(1, 2, 3, 4)),
                                    dict(threads=-1), dict(groups=(1, -2)), dict(threads="many")],
                         ids=["none", "both", "four-dims", "negative", "negative-groups", "string"])
def test_bad_launch_shape(kern: sk.ComputeKernel, launch: dict) -> None:
    args = good()
    with pytest.raises((TypeError, ValueError)):
        kern(**launch, **args)
    assert (args["o"] == 0).all()
    run_ok(kern)


def test_positional_arguments_are_refused(kern: sk.ComputeKernel) -> None:
    with pytest.raises(TypeError):
        kern(N, **good())  # type: ignore[misc]
    run_ok(kern)


def test_zero_threads_is_a_no_op(kern: sk.ComputeKernel) -> None:
    args = good()
    kern(threads=0, **args)
    assert (args["o"] == 0).all()


def test_short_buffer_is_not_an_error_but_cannot_corrupt(kern: sk.ComputeKernel) -> None:
    """A buffer shorter than the dispatch is legal (robust access on every backend): no crash; the
    CPU backend, which can see it, warns."""
    args = good()
    args["x"] = np.arange(4, dtype=np.float32)
    if kern.session.backend.name == "cpu":
        with pytest.warns(sk.OutOfRangeWarning, match="of `x` \\(4 elements\\)"):
            kern(threads=N, **args)
    else:
        kern(threads=N, **args)
    np.testing.assert_allclose(args["o"][:4], np.arange(4) * 2 + 2.5)
    run_ok(kern)


def test_read_only_inputs_are_converted(kern: sk.ComputeKernel) -> None:
    args = good()
    args["x"] = ro(np.arange(N, dtype=np.float64))   # read-only, float64: converted, not written
    args["v"] = [[1, 1, 1]] * N                      # nested lists
    kern(threads=N, **args)
    np.testing.assert_allclose(args["o"], expected(args))


def test_unknown_kernel_name(session: sk.Session, kern: sk.ComputeKernel) -> None:
    with pytest.raises(KeyError, match="no compute kernel named 'bad_inptu'.*bad_input"):
        session.kernel("bad_inptu")


TEXTURE_CELL = """
[shader("compute")][numthreads(4, 4, 1)]
void bad_tex_fill(uint3 t: SV_DispatchThreadID, uniform RWTexture2D<float4> img) { img[t.xy] = float4(t.x, t.y, 0, 1); }
"""


def _read_only_texels() -> np.ndarray:
    return ro(np.zeros((4, 4, 4), np.float32))


@pytest.mark.parametrize("value", [_read_only_texels, lambda: np.zeros((4, 4, 4)),
                                   lambda: np.zeros((4, 4, 4), np.float32, order="F")],
                         ids=["read-only", "float64", "fortran"])
def test_written_texture_advice_works(session: sk.Session, value: Any) -> None:
    """A texture the kernel cannot write in place: where a backend refuses it, its advice, run as
    printed, makes one it writes."""
    session.run_cell(TEXTURE_CELL, name="bad_tex_cell")
    k = session.kernel("bad_tex_fill")
    img = value()
    try:
        k(threads=(4, 4), img=img)
    except ParameterError as exc:
        code = advice_code(str(exc))
        assert "`img`" in str(exc) and code, str(exc)
        names: dict = {"np": np, "img": img}
        for line in code:
            exec(line, names)
        img = names["img"]
        k(threads=(4, 4), img=img)
    # (Vulkan accepts a float64 texture: converted, and written back)
    np.testing.assert_array_equal(img[2, 3], [3, 2, 0, 1])


STRUCT_CELL = """
struct BadInputPoint { float x; int tag; };
[shader("compute")][numthreads(16, 1, 1)]
void bad_points(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<BadInputPoint> pts)
{
    pts[t.x].x = float(t.x); pts[t.x].tag = int(t.x) * 2;
}
"""


@pytest.mark.parametrize("value", [lambda: np.zeros((N, 2), np.float32), lambda: [{"x": 0.0, "tag": 0}] * N],
                         ids=["plain-array", "list-of-dicts"])
def test_written_struct_buffer_advice_works(session: sk.Session, value: Any) -> None:
    """A struct buffer the kernel writes needs its structured dtype: the advice, run with the kernel as
    `k` (as it says), makes one."""
    session.run_cell(STRUCT_CELL, name="bad_points_cell")
    k = session.kernel("bad_points")
    pts = value()
    with pytest.raises(ParameterError, match="`pts`") as info:
        k(threads=N, pts=pts)
    names: dict = {"np": np, "pts": pts, "k": k}
    assert advice_code(str(info.value)), str(info.value)
    for line in advice_code(str(info.value)):
        exec(line, names)
    k(threads=N, pts=names["pts"])
    np.testing.assert_array_equal(names["pts"]["tag"], np.arange(N) * 2)
