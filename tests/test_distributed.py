"""Slang over a real Dask cluster: LocalCluster(n_workers=2, processes=True), module-scoped.

Results equal the in-process ones; the work runs in other processes; a kernel crash on a worker
fails its task with KernelCrash naming the kernel and cell, and that worker's next task gets a
fresh Session; a re-run cell reaches the workers. One worker per GPU is tested where CUDA is.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Iterator

import numpy as np
import pytest

import slang_kernel as sk

da = pytest.importorskip("dask.array", reason="dask is not installed: pip install 'slang-kernel[dask]'")
dd = pytest.importorskip("distributed", reason="distributed is not installed: pip install 'slang-kernel[dask]'")
skd = pytest.importorskip("slang_kernel.distributed")

FUNCTIONS = """
[Differentiable] float dk_poly(float x, float a) { return a * x * x + sin(x); }
float3 dk_scale3(float3 v, float k) { return v * k; }
void dk_split(float x, out float lo, out float hi) { lo = floor(x); hi = x - floor(x); }
"""

KERNELS = """
[shader("compute")][numthreads(64, 1, 1)]
void dk_fill(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
             uniform float scale, uniform float bias, uniform uint n)
{ if (t.x < n) y[t.x] = scale * dk_poly(x[t.x], 1.0) + bias; }

[shader("compute")][numthreads(1, 1, 1)]
void dk_crash(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform uint64_t addr)
{ y[0] = 42; float* p = (float*)addr; p[t.x] = 1; y[1] = 42; }
"""


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = dd.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0")
    c = dd.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def s(cache_dir: str) -> Iterator[sk.Session]:
    session = sk.Session(backend="cpu", cache_dir=cache_dir, threads=1)
    session.run_cell(FUNCTIONS, name="functions")
    session.run_cell(KERNELS, name="kernels", defines={"DK_UNUSED": "1"})
    yield session
    session.close()


def test_spec_is_the_session_through_its_public_api(s: sk.Session) -> None:
    spec = skd.SessionSpec.of(s)
    assert [c.name for c in spec.cells] == list(s.cells)
    assert spec.cells[0].source == s.cell("functions").source
    assert spec.cells[1].defines == (("DK_UNUSED", "1"),)
    assert spec.backend == "cpu" and spec.threads == 1 and spec.isolate
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.digest == spec.digest
    assert skd.SessionSpec.of(s, threads=2).digest != spec.digest
    assert skd.SessionSpec.of(s, cache_dir="/elsewhere").digest == spec.digest   # where, not what


def test_function_on_dask_arrays_equals_in_process(client: Any, s: sk.Session) -> None:
    x_np = np.linspace(-3, 3, 10_000, dtype=np.float32)
    x = da.from_array(x_np, chunks=1_250)
    f = skd.function(s, "dk_poly")
    y = f(x, 0.5)
    assert isinstance(y, da.Array) and y.shape == x.shape and y.dtype == np.float32
    assert y.npartitions == 8    # lazy, one task per block
    np.testing.assert_array_equal(y.compute(), s.function("dk_poly")(x_np, 0.5))
    # numpy broadcasting: a (4, 1) against a (1, 5) grid of blocks
    a = da.from_array(np.arange(4, dtype=np.float32)[:, None], chunks=(2, 1))
    xb = da.from_array(x_np[:5][None, :], chunks=(1, 3))
    np.testing.assert_array_equal(f(xb, a).compute(), s.function("dk_poly")(x_np[:5][None, :], np.arange(4, dtype=np.float32)[:, None]))


@pytest.mark.slow
def test_vectors_out_params_fwd_bwd(client: Any, s: sk.Session) -> None:
    v_np = np.random.default_rng(1).random((100, 3), dtype=np.float32)
    v = da.from_array(v_np, chunks=(30, 3))
    r = skd.function(s, "dk_scale3")(v, da.from_array(np.arange(100, dtype=np.float32), chunks=30))
    assert r.shape == (100, 3)
    np.testing.assert_array_equal(r.compute(), v_np * np.arange(100, dtype=np.float32)[:, None])
    lo, hi = skd.function(s, "dk_split")(da.from_array(np.array([1.25, 2.5, -0.5], np.float32), chunks=2))
    np.testing.assert_array_equal(lo.compute(), [1, 2, -1])
    np.testing.assert_array_equal(hi.compute(), [0.25, 0.5, 0.5])
    x_np = np.linspace(0, 1, 1000, dtype=np.float32)
    x = da.from_array(x_np, chunks=300)
    f, local = skd.function(s, "dk_poly"), s.function("dk_poly")
    val, dval = f.fwd((x, da.ones_like(x)), 2.0)
    want_v, want_d = local.fwd((x_np, np.ones_like(x_np)), 2.0)
    np.testing.assert_array_equal(val.compute(), want_v)
    np.testing.assert_array_equal(dval.compute(), want_d)
    gx, ga = f.bwd(x, 2.0, grad_out=da.full_like(x, 0.5))
    want_gx, want_ga = local.bwd(x_np, 2.0, grad_out=np.full_like(x_np, 0.5))
    np.testing.assert_array_equal(gx.compute(), want_gx)
    np.testing.assert_array_equal(ga.compute(), want_ga)


def test_work_runs_in_the_worker_processes(client: Any, s: sk.Session) -> None:
    spec = skd.SessionSpec.of(s)
    skd.function(s, "dk_poly")(da.ones(4000, chunks=500, dtype=np.float32), 1.0).compute()
    status = client.run(skd.worker_status)
    assert len(status) == 2
    pids = {st.pid for st in status.values()}
    assert os.getpid() not in pids and len(pids) == 2
    assert any(spec.digest in {d for d, _, _ in st.sessions} for st in status.values())


def test_map_kernel_over_a_grid_equals_in_process(client: Any, s: sk.Session) -> None:
    x = np.linspace(-1, 1, 200, dtype=np.float32)
    grid = {"scale": [0.5, 1.0, 2.0], "bias": [0.0, -1.0]}
    out = skd.map_kernel(client, s, "dk_fill", grid, threads=200, x=x, y=np.zeros(200, np.float32), n=200)
    assert sorted(out) == sorted((a, b) for a in grid["scale"] for b in grid["bias"])
    for (scale, bias), arrays in out.items():
        assert set(arrays) == {"y"}    # only RW arrays come back
        y = np.zeros(200, np.float32)
        s.kernel("dk_fill")(threads=200, x=x, y=y, scale=scale, bias=bias, n=200)
        np.testing.assert_array_equal(arrays["y"], y)


def test_a_crash_fails_its_task_and_the_worker_rebuilds(client: Any, s: sk.Session) -> None:
    before = {a: st.builds for a, st in client.run(skd.worker_status).items()}
    with pytest.raises(sk.KernelCrash, match=r"dk_crash \(cell kernels\).*SIGSEGV") as info:
        skd.map_kernel(client, s, "dk_crash", {"addr": [16]}, threads=1, y=np.zeros(4, np.float32))
    assert info.value.kernel == "dk_crash" and "grid point {'addr': 16}" in str(info.value)
    # every worker still works; the one that crashed built a new session for its next task
    out = skd.map_kernel(client, s, "dk_fill", {"scale": [1.0, 2.0, 3.0, 4.0]}, threads=8,
                         x=np.ones(8, np.float32), y=np.zeros(8, np.float32), bias=0.0, n=8)
    assert len(out) == 4
    skd.function(s, "dk_poly")(da.ones(4000, chunks=250, dtype=np.float32), 1.0).compute()
    after = {a: st.builds for a, st in client.run(skd.worker_status).items()}
    assert sum(after.values()) > sum(before.values())


@pytest.mark.slow   # each revision: a build in the notebook and a new Session on each worker
def test_an_edited_cell_reaches_the_workers(client: Any, cache_dir: str) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir, threads=1) as s:
        s.run_cell("float dk_edit(float x) { return x + 1; }", name="edit")
        f = skd.function(s, "dk_edit")
        x = da.arange(100, chunks=25, dtype=np.float32)
        old = f(x)
        np.testing.assert_array_equal(old.compute(), np.arange(100) + 1)
        d1 = skd.SessionSpec.of(s).digest
        s.run_cell("float dk_edit(float x) { return x * 10; }", name="edit")
        assert skd.SessionSpec.of(s).digest != d1
        np.testing.assert_array_equal(f(x).compute(), np.arange(100) * 10)
        np.testing.assert_array_equal(old.compute(), np.arange(100) + 1)   # a built array keeps its spec
        s.set_define("DK_K", "3")
        s.run_cell("float dk_edit(float x) { return x * DK_K; }", name="edit")
        np.testing.assert_array_equal(f(x).compute(), np.arange(100) * 3)


def test_errors_are_raised_in_the_notebook_before_any_task(client: Any, s: sk.Session) -> None:
    with pytest.raises(KeyError, match="no function named 'nope'"):
        skd.function(s, "nope")
    with pytest.raises(TypeError, match="takes 2 argument"):
        skd.function(s, "dk_poly")(da.ones(4, chunks=2))
    with pytest.raises(ValueError, match="trailing shape"):
        skd.function(s, "dk_scale3")(da.ones((4, 2), chunks=2), 1.0)


def _gpus() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


@pytest.mark.cuda
@pytest.mark.parametrize("want", [1, 2], ids=["one_gpu", "two_gpus"])
def test_one_worker_per_gpu(cache_dir: str, want: int) -> None:
    pytest.importorskip("dask_cuda", reason="dask-cuda is not installed (pip install dask-cuda)")
    have = _gpus()
    if have < want:
        pytest.skip(f"needs {want} GPU(s), this machine has {have}")
    with sk.Session(backend="cuda", cache_dir=cache_dir) as s, skd.local_cuda_cluster(want) as cluster, \
            dd.Client(cluster) as c:
        s.run_cell(FUNCTIONS, name="functions")
        s.run_cell(KERNELS, name="kernels")
        x_np = np.linspace(-3, 3, 1 << 20, dtype=np.float32)
        y = skd.function(s, "dk_poly", backend="cuda")(da.from_array(x_np, chunks=1 << 16), 0.5).compute()
        np.testing.assert_array_equal(y, s.function("dk_poly")(x_np, 0.5))
        status = c.run(skd.worker_status)
        assert len(status) == want
        assert len({st.visible_devices.split(",")[0] for st in status.values() if st.visible_devices}) == want
        assert all(st.sessions for st in status.values())   # every GPU's worker did work
