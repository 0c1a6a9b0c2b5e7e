"""Cache robustness: concurrent writers, truncated or corrupted entries, unwritable directories."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.cache import DiskCache

ROOT = Path(__file__).resolve().parents[1]

CELLS = [
    "float cache_f(float x) { return x * 3 + 1; }",
    """
[shader("compute")][numthreads(32, 1, 1)]
void cache_k(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{ o[t.x] = cache_f(x[t.x]); }""",
]


def run_cells(s: sk.Session) -> np.ndarray:
    for i, c in enumerate(CELLS):
        s.run_cell(c, name=f"c{i}")
    x = np.arange(64, dtype=np.float32)
    o = np.zeros(64, np.float32)
    s.kernel("cache_k")(threads=64, o=o, x=x)
    return o


def expected() -> np.ndarray:
    return np.arange(64, dtype=np.float32) * 3 + 1


# -- DiskCache unit behaviour ----------------------------------------------------------------------


def test_roundtrip_and_checksum(tmp_path: Path) -> None:
    c = DiskCache(tmp_path)
    c.put("k", "abcd", b"hello")
    assert c.get("k", "abcd") == b"hello"
    p = c.path("k", "abcd")
    raw = bytearray(p.read_bytes())
    raw[-1] ^= 0xFF                        # one flipped bit: a miss, not wrong data
    p.write_bytes(bytes(raw))
    assert c.get("k", "abcd") is None
    p.write_bytes(b"")                     # empty
    assert c.get("k", "abcd") is None
    p.write_bytes(b"SKC1")                 # header only
    assert c.get("k", "abcd") is None
    p.unlink()
    p.mkdir()                              # a directory where the entry should be
    assert c.get("k", "abcd") is None
    c.put("k", "abcd", b"again")           # cannot replace a directory: ignored, no exception
    assert c.get("k", "abcd") is None
    assert not list(p.parent.glob(".tmp-*"))  # no temp file left behind


def test_cache_directory_deleted_while_running(tmp_path: Path) -> None:
    c = DiskCache(tmp_path / "cache")
    c.put("k", "0011", b"x")
    import shutil

    shutil.rmtree(tmp_path / "cache")      # "safe to delete"
    assert c.get("k", "0011") is None
    c.put("k", "0011", b"y")
    assert c.get("k", "0011") == b"y"
    assert c.scratch_dir().is_dir()


def test_disabled_cache(tmp_path: Path) -> None:
    c = DiskCache(tmp_path, enabled=False)
    c.put("k", "ab", b"z")
    assert c.get("k", "ab") is None


# -- unwritable directories ------------------------------------------------------------------------


def _unwritable_dirs(tmp_path: Path) -> list[Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = [blocker / "cache"]                   # its parent is a file: mkdir fails even for root
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    if not os.access(ro, os.W_OK):            # root can write anyway: then only the first case
        out.append(ro)
    return out


def test_read_only_cache_falls_back_to_memory(tmp_path: Path) -> None:
    for root in _unwritable_dirs(tmp_path):
        with pytest.warns(UserWarning, match="not writable.*caching in memory"):
            c = DiskCache(root)
        assert not c.writable
        c.put("k", "ab", b"z")
        assert c.get("k", "ab") == b"z"        # memory


def test_session_with_read_only_cache_works(tmp_path: Path) -> None:
    root = _unwritable_dirs(tmp_path)[0]
    with pytest.warns(UserWarning, match="not writable"):
        s = sk.Session(backend="cpu", cache_dir=str(root))
    try:
        np.testing.assert_array_equal(run_cells(s), expected())
        with warnings.catch_warnings():
            warnings.simplefilter("error")       # one warning, not one per compile
            s.run_cell("float cache_g(float x) { return x; }")
    finally:
        s.close()


# -- truncated and corrupted entries -------------------------------------------------------------


@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "zero-body", "empty"])
def test_damaged_entries_are_rebuilt(tmp_path: Path, damage: str, isolate: bool) -> None:
    with sk.Session(backend="cpu", cache_dir=str(tmp_path)) as s:
        np.testing.assert_array_equal(run_cells(s), expected())
    files = [f for kind in ("cells", "kernels", "cpu") for f in (tmp_path / kind).rglob("*") if f.is_file()]
    assert any(f.suffix == ".so" for f in files)
    for f in files:
        raw = f.read_bytes()
        if damage == "truncate":
            f.write_bytes(raw[: len(raw) // 3])
        elif damage == "garbage":
            f.write_bytes(os.urandom(len(raw)))
        elif damage == "zero-body":           # header intact, everything after it zeroed
            f.write_bytes(raw[:64] + bytes(len(raw) - 64))
        else:
            f.write_bytes(b"")
    with sk.Session(backend="cpu", cache_dir=str(tmp_path), isolate=isolate) as s:
        np.testing.assert_array_equal(run_cells(s), expected())


def test_damaged_so_in_a_running_session_is_rebuilt(tmp_path: Path) -> None:
    """The .so is replaced by a damaged one between two dispatches of a fresh worker."""
    with sk.Session(backend="cpu", cache_dir=str(tmp_path)) as s:
        run_cells(s)
        (so,) = (tmp_path / "cpu").rglob("*.so")
        raw = so.read_bytes()
        so.write_bytes(raw[:64] + bytes(len(raw) - 64))
        s.reset_device()                     # the new worker has to load it from disk
        np.testing.assert_array_equal(run_cells(s), expected())


# -- two processes at once -------------------------------------------------------------------------

CHILD = """
import sys, numpy as np, slang_kernel as sk
sys.path.insert(0, {tests!r})
from test_cache import run_cells, expected
s = sk.Session(backend="cpu", cache_dir={cache!r})
for _ in range(3):
    np.testing.assert_array_equal(run_cells(s), expected())
s.close()
print("OK")
"""


def test_two_processes_share_one_cache_dir(tmp_path: Path) -> None:
    code = textwrap.dedent(CHILD.format(tests=str(Path(__file__).parent), cache=str(tmp_path)))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "OK" in out, err[-2000:]
    leftovers = [f for f in tmp_path.rglob("*") if f.is_file() and (f.name.startswith(".tmp-") or f.suffix == ".cpp")]
    assert not leftovers
    # and a third session finds every entry intact
    with sk.Session(backend="cpu", cache_dir=str(tmp_path)) as s:
        np.testing.assert_array_equal(run_cells(s), expected())
