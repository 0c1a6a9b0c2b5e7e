"""A kernel bug never takes the notebook down: CPU kernels run in a worker process.

Crashes (SIGSEGV, stack overflow, SIGABRT) become KernelCrash naming the kernel; endless kernels
stop on Session(timeout=...) or Ctrl-C (SIGINT, also sent to the whole process group as Jupyter
does); the worker restarts by itself and every cell, kernel and buffer of the session is still there.
Bounds checking, in the worker and in-process: test_checked.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.engine.kernels import KernelCrash, KernelInterrupted, KernelTimeout
from tests.waiting import cpu_seconds, process_gone, wait_until

ROOT = Path(__file__).resolve().parents[1]

KERNELS = """
[shader("compute")][numthreads(64, 1, 1)]
void iso_saxpy(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y,
               uniform StructuredBuffer<float> x, uniform float a, uniform uint n)
{ if (t.x < n) y[t.x] = a * x[t.x] + y[t.x]; }

[shader("compute")][numthreads(1, 1, 1)]
void crash_ptr(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform uint64_t addr)
{ y[0] = 42; float* p = (float*)addr; p[t.x] = 1; y[1] = 42; }

[shader("compute")][numthreads(1, 1, 1)]
void crash_stack(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform uint n)
{
    float big[4194304];   // 16 MiB on an 8 MiB stack
    for (uint i = 0; i < n; i++) big[i * 4099 % 4194304] = float(i);
    y[0] = big[n % 4194304];
}

[shader("compute")][numthreads(1, 1, 1)]
void endless(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform uint step)
{ uint i = 0; while (y[0] >= 0) { i += step; y[1] = float(i); } }

[shader("compute")][numthreads(1, 1, 1)]
void shout(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uint64_t addr)
{ printf("before the crash %d\\n", 7); float* p = (float*)addr; p[0] = 1; }
"""


@pytest.fixture(scope="module")
def iso(cache_dir: str):
    s = sk.Session(backend="cpu", cache_dir=cache_dir, timeout=None)
    s.run_cell("float iso_helper(float x) { return x * 3; }", name="helper")
    s.run_cell(KERNELS, name="kernels")
    yield s
    s.close()


def saxpy_works(s: sk.Session) -> None:
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    s.kernel("iso_saxpy")(threads=100, y=y, x=x, a=2.0, n=100)
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert s.function("iso_helper")(np.float32(2)) == 6.0


def test_segfault_is_an_exception_naming_the_kernel(iso: sk.Session) -> None:
    saxpy_works(iso)
    pid = iso.backend.worker_pid
    cells = iso.cells
    y = np.full(4, -1, np.float32)
    with pytest.raises(KernelCrash, match=r"crash_ptr crashed \(killed by SIGSEGV\)") as info:
        iso.kernel("crash_ptr")(threads=1, y=y, addr=16)
    assert info.value.kernel == "crash_ptr" and info.value.signal == "SIGSEGV"
    assert "`y` unchanged" in str(info.value)
    assert (y == -1).all()                # the kernel wrote a staged copy; nothing came back
    assert iso.cells == cells              # every cell is still there
    assert iso.backend.worker_pid != pid   # a new worker
    saxpy_works(iso)                       # and it works


def test_stack_overflow_is_a_crash(iso: sk.Session) -> None:
    y = np.zeros(4, np.float32)
    with pytest.raises(KernelCrash, match=r"crash_stack crashed \(killed by SIGSEGV\)"):
        iso.kernel("crash_stack")(threads=1, y=y, n=4194304)
    saxpy_works(iso)


def test_abort_is_a_crash(iso: sk.Session) -> None:
    iso.kernel("endless")(threads=1, y=np.full(4, -1, np.float32), step=1)  # built; returns at once
    y = np.zeros(4, np.float32)
    timer = threading.Timer(0.3, lambda: os.kill(iso.backend.worker_pid, signal.SIGABRT))
    timer.start()
    with pytest.raises(KernelCrash, match=r"endless crashed \(aborted with SIGABRT\)"):
        iso.kernel("endless")(threads=1, y=y, step=1)
    timer.join()
    saxpy_works(iso)


def test_timeout_stops_an_endless_kernel(cache_dir: str) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir, timeout=0.5) as s:
        s.run_cell(KERNELS)
        y = np.zeros(4, np.float32)
        s.kernel("iso_saxpy")(threads=4, y=y, x=np.ones(4, np.float32), a=1.0, n=4)  # warm (g++)
        t0 = time.perf_counter()
        with pytest.raises(KernelTimeout, match=r"endless did not finish within 0.5 s") as info:
            s.kernel("endless")(threads=1, y=y, step=1)
        assert time.perf_counter() - t0 < 5  # ~0.5 s; generous so a loaded CI machine does not flake
        assert isinstance(info.value, TimeoutError)
        saxpy_works_here = np.zeros(4, np.float32)
        s.kernel("iso_saxpy")(threads=4, y=saxpy_works_here, x=np.ones(4, np.float32), a=1.0, n=4)
        assert (saxpy_works_here == 1).all()


def test_keyboard_interrupt_stops_a_dispatch_within_a_second(iso: sk.Session) -> None:
    y = np.zeros(4, np.float32)
    iso.kernel("endless")(threads=1, y=np.full(4, -1, np.float32), step=1)  # built; returns at once
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt) as info:
        iso.kernel("endless")(threads=1, y=y, step=1)
    elapsed = time.perf_counter() - t0
    timer.join()
    assert isinstance(info.value, KernelInterrupted)
    print(f"interrupt stopped the dispatch {elapsed - 0.5:.2f} s after SIGINT")
    assert elapsed < 5  # stopped, not run to the end; ~0.5 s here, generous for a loaded CI machine
    assert "endless interrupted after" in str(info.value) and "the CPU worker was restarted" in str(info.value)
    assert "`y` unchanged" in str(info.value)
    saxpy_works(iso)


def test_sigint_to_the_process_group_as_jupyter_sends_it(cache_dir: str, tmp_path: Path) -> None:
    """Jupyter's interrupt signals the kernel's whole process group: the worker ignores SIGINT, the
    parent raises KernelInterrupted, and the session goes on."""
    (tmp_path / "k.slang").write_text(KERNELS)
    script = tmp_path / "nb.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time, numpy as np
        import slang_kernel as sk
        s = sk.Session(backend="cpu", cache_dir={cache_dir!r})
        s.run_cell(open({str(tmp_path / 'k.slang')!r}).read())
        y = np.zeros(4, np.float32)
        s.kernel("endless")(threads=1, y=np.full(4, -1, np.float32), step=1)
        print("READY", s.backend.worker_pid, flush=True)
        try:
            s.kernel("endless")(threads=1, y=y, step=1)
        except KeyboardInterrupt as exc:
            print("CAUGHT", type(exc).__name__, exc, flush=True)
        x = np.arange(8, dtype=np.float32); o = np.zeros(8, np.float32)
        s.kernel("iso_saxpy")(threads=8, y=o, x=x, a=1.0, n=8)
        print("AFTER", o.sum(), flush=True)
        s.close()
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        worker = int(line.split()[1])
        idle = cpu_seconds(worker)
        wait_until(lambda: cpu_seconds(worker) > idle + 0.2, 60, "the endless dispatch running in the CPU worker")
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert time.perf_counter() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "CAUGHT KernelInterrupted endless interrupted after" in out
    assert "AFTER 28.0" in out


def test_worker_killed_while_idle_is_replaced(iso: sk.Session) -> None:
    saxpy_works(iso)
    pid = iso.backend.worker_pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: process_gone(pid), 10, f"the killed CPU worker {pid} gone")
    saxpy_works(iso)
    assert iso.backend.worker_pid != pid


def test_reset_device(iso: sk.Session) -> None:
    pid = iso.backend.worker_pid
    iso.reset_device()
    assert iso.backend.worker_pid != pid
    saxpy_works(iso)


def test_printf_before_a_crash_reaches_the_cell(iso: sk.Session, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KernelCrash, match="shout crashed"):
        iso.kernel("shout")(threads=1, y=np.zeros(1, np.float32), addr=8)
    assert "before the crash 7" in capsys.readouterr().out


def test_worker_dies_with_its_parent(cache_dir: str, tmp_path: Path) -> None:
    (tmp_path / "k.slang").write_text(KERNELS)
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np, slang_kernel as sk
        s = sk.Session(backend="cpu", cache_dir={cache_dir!r})
        s.run_cell(open({str(tmp_path / 'k.slang')!r}).read())
        s.kernel("iso_saxpy")(threads=4, y=np.zeros(4, np.float32), x=np.ones(4, np.float32), a=1.0, n=4)
        print(s.backend.worker_pid, flush=True)
        import signal; signal.pause()   # alive until the test kills it
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    proc.kill()
    proc.wait()
    try:
        wait_until(lambda: process_gone(worker), 10, "the CPU worker to end with its parent")
    except AssertionError:
        os.kill(worker, signal.SIGKILL)
        raise


# -- shared memory ---------------------------------------------------------------------------------


def test_shared_arrays_are_used_in_place(iso: sk.Session) -> None:
    n = 1 << 16
    x = iso.backend.shared(np.arange(n, dtype=np.float32))
    y = iso.backend.zeros(n, np.float32)
    assert (y == 0).all()
    iso.kernel("iso_saxpy")(threads=n, y=y, x=x, a=3.0, n=n)
    np.testing.assert_array_equal(y, 3 * np.arange(n, dtype=np.float32))
    view = y[: n // 2]                        # a view of a shared array is shared too
    iso.kernel("iso_saxpy")(threads=n // 2, y=view, x=x[: n // 2], a=1.0, n=n // 2)
    np.testing.assert_array_equal(y[: n // 2], 4 * np.arange(n // 2, dtype=np.float32))
    with pytest.raises(KernelCrash, match=r"`y` may be partially written"):
        iso.kernel("crash_ptr")(threads=1, y=y, addr=16)
    assert y[0] == 42                         # written in place before the crash


def test_same_array_twice_is_one_buffer(iso: sk.Session) -> None:
    y = np.ones(64, np.float32)
    iso.kernel("iso_saxpy")(threads=64, y=y, x=y, a=1.0, n=64)  # y = y + y
    assert (y == 2).all()


def test_large_arrays_grow_the_staging_segment(iso: sk.Session) -> None:
    n = 3 << 20
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    y = np.ones(n, np.float32)
    iso.kernel("iso_saxpy")(threads=n, y=y, x=x, a=2.0, n=n)
    np.testing.assert_allclose(y, 2 * x + 1, rtol=1e-6)


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "worker"])
def test_in_process_opt_in(cache_dir: str, isolate: bool) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir, isolate=isolate) as s:
        assert ("in-process" in s.backend.describe()) == (not isolate)
        assert (s.backend.worker_pid is None) == (not isolate)
        s.run_cell(KERNELS)
        saxpy_run = np.zeros(10, np.float32)
        s.kernel("iso_saxpy")(threads=10, y=saxpy_run, x=np.arange(10, dtype=np.float32), a=1.0, n=10)
        assert saxpy_run.sum() == 45


def test_groups_are_cut_along_the_outer_of_the_longest_axes() -> None:
    """Each pool thread takes slices of the group range: several per thread, whole rows of an image."""
    from slang_kernel.backends.cpu.worker import split

    assert split((32, 32, 1), 2) == (1, 16)
    assert split((7, 5, 1), 2) == (0, 7)
    assert split((2, 2, 2), 4) == (2, 2)
    assert split((1000, 1, 1), 1) == (0, 1)


# -- soak ------------------------------------------------------------------------------------------

SOAK_DEFS = "float soak_f(float x) {{ return x * {k} + {c}; }}"
SOAK_KERNEL = """
[shader("compute")][numthreads(64, 1, 1)]
void soak_k(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x,
            uniform uint n)
{ if (t.x < n) o[t.x] = soak_f(x[t.x]); }
[shader("compute")][numthreads(1, 1, 1)]
void soak_crash(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform uint64_t addr)
{ float* p = (float*)addr; p[0] = 1; }
"""


def _rss_kib(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
def test_soak_edits_and_dispatches(cache_dir: str) -> None:
    """Cell edits, dispatches, crashes and errors in one session: RSS and open files stay bounded.
    300 iterations by default (< 60 s); SLANG_KERNEL_SOAK=1000 for the long run."""
    iterations = int(os.environ.get("SLANG_KERNEL_SOAK", "300"))
    s = sk.Session(backend="cpu", cache_dir=cache_dir)
    s.run_cell(SOAK_DEFS.format(k=1, c=0), name="defs")
    s.run_cell(SOAK_KERNEL, name="kern")
    rng = np.random.default_rng(0)
    samples = []
    stats = {"crashes": 0, "compile_errors": 0, "bad_input": 0, "unique_edits": 0}
    t0 = time.perf_counter()
    for i in range(iterations):
        if i % 40 == 39:                                    # a brand-new edit: compiler + g++
            k, c = 100 + i, i
            stats["unique_edits"] += 1
        else:                                               # edits among a few versions (cache hits)
            k, c = i % 4 + 1, i % 3
        s.run_cell(SOAK_DEFS.format(k=k, c=c), name="defs")
        n = int(rng.integers(1, 1 << 16))
        x = rng.standard_normal(n).astype(np.float32)
        o = np.zeros(n, np.float32)
        s.kernel("soak_k")(threads=n, o=o, x=x, n=n)
        np.testing.assert_allclose(o, x * k + c, rtol=1e-5, atol=1e-6 * k)  # FMA
        if i % 50 == 25:
            with pytest.raises(KernelCrash):
                s.kernel("soak_crash")(threads=1, o=o, addr=8)
            stats["crashes"] += 1
        if i % 10 == 5:
            with pytest.raises(sk.SlangCompileError):
                s.run_cell(f"float soak_bad{i}(float x) {{ return x + ; }}", name="bad")
            stats["compile_errors"] += 1
        if i % 10 == 7:
            with pytest.raises(sk.ParameterError):
                s.kernel("soak_k")(threads=n, o=o.astype(np.float64), x=x, n=n)
            stats["bad_input"] += 1
        if i == 20 or i == iterations - 1:
            import gc

            gc.collect()
            samples.append((_rss_kib(), _fds(), _rss_kib(s.backend.worker_pid)))
    elapsed = time.perf_counter() - t0
    s.close()
    (rss0, fd0, w0), (rss1, fd1, w1) = samples
    print(f"\nsoak: {iterations} iterations in {elapsed:.1f} s; {stats}; parent RSS {rss0 / 1024:.1f} -> "
          f"{rss1 / 1024:.1f} MiB, fds {fd0} -> {fd1}, worker RSS {w0 / 1024:.1f} -> {w1 / 1024:.1f} MiB")
    assert fd1 <= fd0 + 3
    assert rss1 - rss0 < 64 * 1024 * (iterations / 300)
