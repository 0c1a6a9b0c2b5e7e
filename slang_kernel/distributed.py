"""Slang functions and kernels over a Dask cluster (`pip install 'slang-kernel[dask]'`).

A Session lives in one process, and its compiler and backend workers cannot be pickled. What crosses
to a Dask worker is a `SessionSpec`: the cells' sources in order (with their own defines and
options), the session's defines and options, the backend and its configuration. Each worker process
rebuilds a Session from it once per spec digest (its cells hit the content-addressed compile cache
the notebook already filled, when both share a cache folder), keeps it for the next tasks, and
rebuilds it after a kernel crashed it. Re-running a cell in the notebook makes a new spec (a new
digest), so the next graph built uses the new revision; a dask array already built keeps the spec
it was built from, as every lazy recipe does.

    s = sk.Session(backend="cpu")
    s.run_cell("float sqr(float x) { return x * x; }")
    f = distributed.function(s, "sqr")         # lazy: dask arrays in, dask arrays out
    y = f(da.random.random(2**24, chunks=2**20).astype("f4")).compute()
    out = distributed.map_kernel(client, s, "fill", {"scale": [1, 2, 3]}, threads=64, y=np.zeros(64, "f4"))
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator, Literal, Mapping, Sequence

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as exc:  # the optional extra
    raise ImportError(
        "slang_kernel.distributed needs Dask: pip install 'slang-kernel[dask]' "
        "(dask[array] and distributed)") from exc

from .cache import digest as _digest
from .errors import DeviceLost, KernelCrash

if TYPE_CHECKING:
    from distributed import Client, Future

    from .engine.autodiff import SlangFunction
    from .engine.kernels import ComputeKernel
    from .engine.session import Session

__all__ = ["CellSpec", "DaskFunction", "SessionSpec", "WorkerStatus", "function", "local_cuda_cluster",
           "map_kernel", "worker_session", "worker_status"]

SAME: Literal["session"] = "session"   # "keep the session's value" for SessionSpec.of overrides
KEEP_SESSIONS = 2   # sessions a worker keeps: the current spec and the one before (arrays built earlier)


# -- the spec that crosses processes ----------------------------------------------------------------


@dataclass(frozen=True)
class CellSpec:
    """One cell as the notebook ran it: name, source, and its own defines and options."""

    name: str
    source: str
    defines: tuple[tuple[str, str], ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionSpec:
    """Everything a worker needs to rebuild a Session, read through the Session's public API.

    `cache_dir` (where the worker's compile cache lives; None: the worker's default, e.g.
    $SLANG_KERNEL_CACHE_DIR) says where, not what, so it is not part of the digest."""

    cells: tuple[CellSpec, ...]
    defines: tuple[tuple[str, str], ...] = ()
    options: tuple[str, ...] = ()
    backend: str = "cpu"
    threads: int | None = None
    checked: bool = False
    timeout: float | None = None
    isolate: bool = True
    fingerprint: str = ""   # compiler build and our Slang modules: a worker with another build refuses
    cache_dir: str | None = field(default=None, compare=False)
    cache: bool = field(default=True, compare=False)

    @classmethod
    def of(cls, session: Session, *, backend: str | None = None,
           threads: int | None | Literal["session"] = SAME, cache_dir: str | None | Literal["session"] = SAME,
           ) -> SessionSpec:
        """The spec of a session as it is now. backend/threads: what the workers should use instead
        (e.g. threads=1 on a cluster with one thread per worker; backend="cuda" on GPU workers)."""
        cells = tuple(CellSpec(n, c.source, tuple(c.own_defines), tuple(c.options))
                      for n, c in ((n, session.cell(n)) for n in session.cells))
        cfg = session.config
        root = str(cfg.cache.root) if cfg.cache.enabled else None
        return cls(cells=cells, defines=tuple(sorted(session.defines.items())), options=tuple(session.compile_service.options),
                   backend=backend or session.backend.name, threads=cfg.threads if threads == SAME else threads,
                   checked=cfg.checked, timeout=cfg.timeout, isolate=cfg.isolate, fingerprint=session.compile_service.fingerprint,
                   cache_dir=root if cache_dir == SAME else cache_dir, cache=cfg.cache.enabled)

    @property
    def digest(self) -> str:
        """A content digest: equal specs build equal sessions."""
        parts: list[str] = []
        for f in fields(self):
            if f.compare:
                parts.append(f"{f.name}={getattr(self, f.name)!r}")
        return _digest("SessionSpec", *parts)

    def build(self) -> Session:
        """A Session with these cells, run in order (each compile check hits the shared cache)."""
        from .engine.session import Session

        s = Session(self.backend, cache_dir=self.cache_dir, cache=self.cache, options=self.options,
                    defines=dict(self.defines), threads=self.threads, checked=self.checked, timeout=self.timeout,
                    isolate=self.isolate)
        try:
            if self.fingerprint and s.compile_service.fingerprint != self.fingerprint:
                raise RuntimeError(
                    f"this worker (pid {os.getpid()}) has another Slang compiler or slang-kernel build than the "
                    f"notebook ({s.compile_service.fingerprint} vs {self.fingerprint}): install the same versions on every worker")
            for c in self.cells:
                s.run_cell(c.source, name=c.name, defines=dict(c.defines), options=c.options)
        except BaseException:
            s.close()
            raise
        return s


def _spec(source: Session | SessionSpec) -> SessionSpec:
    return source if isinstance(source, SessionSpec) else SessionSpec.of(source)


# -- the worker side: one Session per spec digest, per process ---------------------------------------


@dataclass
class _Live:
    session: Session
    build: int                                   # which build of this process it is (1, 2, ...)
    lock: threading.Lock = field(default_factory=threading.Lock)   # a Session is not thread-safe
    functions: dict[str, SlangFunction] = field(default_factory=dict)
    kernels: dict[str, ComputeKernel] = field(default_factory=dict)


_LIVE: OrderedDict[str, _Live] = OrderedDict()
_LIVE_LOCK = threading.Lock()
_BUILDS = [0]   # sessions built in this process (under _LIVE_LOCK)


@dataclass(frozen=True)
class WorkerStatus:
    """What a worker process holds (for tests and for checking where work ran)."""

    pid: int
    builds: int                                  # sessions built in this process so far
    sessions: tuple[tuple[str, int, str], ...]   # (spec digest, build number, backend description)
    visible_devices: str | None                  # CUDA_VISIBLE_DEVICES (one GPU per worker under dask-cuda)


def worker_status() -> WorkerStatus:
    """Run on every worker with `client.run(worker_status)`."""
    with _LIVE_LOCK:
        sessions = tuple((d, live.build, live.session.backend.describe()) for d, live in _LIVE.items())
        return WorkerStatus(os.getpid(), _BUILDS[0], sessions, os.environ.get("CUDA_VISIBLE_DEVICES"))


def _acquire(spec: SessionSpec) -> _Live:
    key = spec.digest
    with _LIVE_LOCK:
        live = _LIVE.get(key)
        if live is not None:
            _LIVE.move_to_end(key)
            return live
    session = spec.build()   # outside the lock: tasks of other specs go on meanwhile
    with _LIVE_LOCK:
        live = _LIVE.get(key)
        if live is not None:      # another thread built it first
            session.close()
            return live
        _BUILDS[0] += 1
        live = _LIVE[key] = _Live(session, _BUILDS[0])
        for old in [d for d in _LIVE if d != key][: max(0, len(_LIVE) - KEEP_SESSIONS)]:
            if not _LIVE[old].lock.locked():
                _close_later(_LIVE.pop(old).session)
    return live


def _close_later(session: Session) -> None:
    """Closing waits for the compiler and backend processes to exit (seconds on a loaded machine):
    not on the task's time."""
    def close() -> None:
        try:
            session.close()
        except Exception:
            pass   # a backend that just crashed may not close cleanly; nothing depends on it any more
    threading.Thread(target=close, name="slang-session-close", daemon=True).start()


def _discard(spec: SessionSpec, live: _Live) -> None:
    with _LIVE_LOCK:
        if _LIVE.get(spec.digest) is live:
            del _LIVE[spec.digest]
    _close_later(live.session)


@contextmanager
def _running(spec: SessionSpec, what: str) -> Iterator[_Live]:
    live = _acquire(spec)
    with live.lock:
        try:
            yield live
        except (KernelCrash, DeviceLost) as exc:
            _discard(spec, live)
            cell = _owner(live.session, what)
            message = (f"{what or 'a kernel'} (cell {cell}) failed on the Dask worker with pid {os.getpid()}: "
                       f"{exc} That worker's session is rebuilt for its next task.")
            if isinstance(exc, KernelCrash):
                raise KernelCrash(message, kernel=exc.kernel or what, signal=exc.signal) from None
            raise DeviceLost(message) from None


@contextmanager
def worker_session(spec: SessionSpec, what: str = "") -> Iterator[Session]:
    """This process's Session for `spec` (built on first use, kept for later tasks). A KernelCrash
    (or a lost device) is raised again naming the cell, the kernel (`what`) and this worker, and the
    Session is dropped so that the next task builds a fresh one."""
    with _running(spec, what) as live:
        yield live.session


def _owner(session: Session, name: str) -> str:
    try:
        return session.store.owner(name).name
    except Exception:
        return "?"


# -- SlangFunction on dask arrays ---------------------------------------------------------------------

_SCALARS = "bool|int|uint|float|half|double|int8_t|int16_t|int64_t|uint8_t|uint16_t|uint64_t"
_VECTOR = re.compile(rf"^(?:{_SCALARS})([1-4])(?:x([1-4]))?$")


def _trailing(slang_type: str) -> tuple[int, ...]:
    """The element's trailing numpy shape: float3 -> (3,), float2x2 -> (2, 2), structs and scalars -> ()."""
    m = _VECTOR.match(slang_type)
    if not m:
        return ()
    return (int(m.group(1)),) if m.group(2) is None else (int(m.group(1)), int(m.group(2)))


def _as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (result,)


def _function_block(*blocks: np.ndarray, spec: SessionSpec, function_name: str, mode: str, layout: tuple[int, ...],
                    has_grad_out: bool) -> tuple[np.ndarray, ...] | np.ndarray:
    """One block, on a worker. layout: per argument, 1 (a value) or 2 ((primal, tangent) in .fwd).
    (Not `name=`: blockwise takes that keyword for the graph's key.)"""
    with _running(spec, function_name) as live:
        f = live.functions.get(function_name) or live.functions.setdefault(function_name,
                                                                            live.session.function(function_name))
        out = _call(f, mode, list(blocks), layout, has_grad_out)
    return out if len(out) > 1 else out[0]


class DaskFunction:
    """A session's SlangFunction over dask arrays: lazy, block by block on the workers, broadcasting
    as numpy does. Arguments may be dask arrays, numpy arrays or scalars.

    The spec is read from the session at each call, so a re-run cell reaches the arrays built after
    it. Each call also runs the function once in the notebook's session on one element: argument
    errors show at once, and the output dtypes and shapes come from the real call."""

    def __init__(self, source: Session | SessionSpec, name: str, *, backend: str | None = None,
                 threads: int | None | Literal["session"] = SAME) -> None:
        self.source, self.name, self.backend, self.threads = source, name, backend, threads

    def spec(self) -> SessionSpec:
        if isinstance(self.source, SessionSpec):
            return self.source
        return SessionSpec.of(self.source, backend=self.backend, threads=self.threads)

    def _local(self) -> SlangFunction:
        if isinstance(self.source, SessionSpec):
            raise TypeError("DaskFunction from a SessionSpec needs the notebook's Session for its sample call")
        return self.source.function(self.name)

    def __call__(self, *args: Any) -> Any:
        return self._apply("call", [(a,) for a in args], None)

    def fwd(self, *args: Any) -> tuple[Any, Any]:
        """Forward mode, as SlangFunction.fwd: differentiable inputs as (primal, tangent) pairs."""
        parts = [tuple(a) if isinstance(a, tuple) and len(a) == 2 else (a,) for a in args]
        out = self._apply("fwd", parts, None)
        return out[0], out[1]

    def bwd(self, *args: Any, grad_out: Any = None) -> Any:
        """Reverse mode, as SlangFunction.bwd (grad_out may be a dask array too; None means 1)."""
        return self._apply("bwd", [(a,) for a in args], grad_out)

    def _apply(self, mode: str, parts: list[tuple[Any, ...]], grad_out: Any) -> Any:
        local = self._local()
        fn = local.info(len(parts))
        idx = [i for i, (_, _, d) in enumerate(fn.params) if d != "out"]
        trailing = [_trailing(fn.params[i][1]) for i in idx]
        flat: list[Any] = []
        cores: list[tuple[int, ...]] = []
        for group, core in zip(parts, trailing):
            for a in group:
                arr = a if isinstance(a, da.Array) else np.asarray(a)
                if arr.ndim < len(core) or tuple(arr.shape[arr.ndim - len(core):]) != core:
                    raise ValueError(f"{self.name}: an argument of Slang type {fn.params[idx[len(cores)]][1]} "
                                     f"needs trailing shape {core}; got {arr.shape}")
                flat.append(arr)
                cores.append(core)
        if grad_out is not None:
            g = grad_out if isinstance(grad_out, da.Array) else np.asarray(grad_out)
            core = _trailing(fn.result)
            flat.append(g)
            cores.append(core if g.ndim >= len(core) and tuple(g.shape[g.ndim - len(core):]) == core else ())
        # One element through the notebook's session: errors now, and the outputs' dtypes and shapes.
        sample = [np.zeros(c, dtype=a.dtype) for a, c in zip(flat, cores)]
        layout = tuple(len(g) for g in parts)
        out = _call(local, mode, sample, layout, grad_out is not None)
        sizes: dict[str, int] = {}
        ins = []
        for k, c in enumerate(cores):
            ins.append("(" + ",".join(f"i{k}_{j}" for j in range(len(c))) + ")")
        outs = []
        for m, o in enumerate(out):
            names = [f"o{m}_{j}" for j in range(o.ndim)]
            sizes.update(zip(names, o.shape))
            outs.append("(" + ",".join(names) + ")")
        signature = ",".join(ins) + "->" + (",".join(outs) if len(outs) > 1 else outs[0])
        spec = self.spec()
        spec_node = dask.delayed(spec, name=f"slang-spec-{spec.digest}", pure=True)
        result = da.apply_gufunc(
            _function_block, signature, *flat, output_dtypes=[o.dtype for o in out], output_sizes=sizes,
            allow_rechunk=True, spec=spec_node, function_name=self.name, mode=mode, layout=layout,
            has_grad_out=grad_out is not None)
        return result

    def __repr__(self) -> str:
        return f"<DaskFunction {self.name} of {type(self.source).__name__}>"


def _call(f: SlangFunction, mode: str, values: list[np.ndarray], layout: tuple[int, ...],
          has_grad_out: bool) -> tuple[np.ndarray, ...]:
    """`f` called (mode "call", "fwd" or "bwd") on flat `values`: per argument 1 (a value) or 2
    ((primal, tangent) in .fwd) of them, as `layout` says, and the output gradient last if given."""
    values = list(values)
    grad_out = values.pop() if has_grad_out else None
    args: list[Any] = []
    for n in layout:
        args.append(tuple(values[:2]) if n == 2 else values[0])
        del values[:n]
    if mode == "call":
        return _as_tuple(f(*args))
    if mode == "fwd":
        return tuple(f.fwd(*args))
    return _as_tuple(f.bwd(*args, grad_out=1.0 if grad_out is None else grad_out))


def function(source: Session | SessionSpec, name: str, *, backend: str | None = None,
             threads: int | None | Literal["session"] = SAME) -> DaskFunction:
    """`function(session, "sqr")(x_dask)` -> a dask array. backend/threads: what the workers use."""
    if not isinstance(source, SessionSpec):
        source.store.function_info(name)   # a KeyError naming what is defined, now rather than at compute time
    return DaskFunction(source, name, backend=backend, threads=threads)


# -- a ComputeKernel over a parameter grid -------------------------------------------------------------


def _kernel_task(spec: SessionSpec, name: str, fixed: Mapping[str, Any], point: Mapping[str, Any],
                 ) -> dict[str, np.ndarray]:
    """One grid point, on a worker: arrays are copied (the fixed ones are shared by every task here);
    the kernel's RW arrays come back."""
    params: dict[str, Any] = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in {**fixed, **point}.items()}
    with _running(spec, name) as live:
        k = live.kernels.get(name) or live.kernels.setdefault(name, live.session.kernel(name))
        try:
            k(**params)
        except KernelCrash as exc:
            raise KernelCrash(f"{exc} (grid point {dict(point)!r})", kernel=exc.kernel or name,
                              signal=exc.signal) from None
        writable = {p.name for p in k.params if p.type.writable}
    return {n: v for n, v in params.items() if n in writable and isinstance(v, np.ndarray)}


def map_kernel(client: Client, source: Session | SessionSpec, kernel: str, grid: Mapping[str, Sequence[Any]],
               /, **params: Any) -> dict[tuple[Any, ...], dict[str, np.ndarray]]:
    """Run a ComputeKernel once per point of `grid` (the product of its value lists) on the cluster.

    params: the values every point shares (threads=/groups= included; a grid entry may vary them
    too). Returns, keyed by the point's values in the grid's order, the kernel's RW arrays as the
    worker left them. The shared values go to the cluster once; a failing point raises (KernelCrash
    names the kernel, its cell and the point)."""
    spec = _spec(source)
    if not isinstance(source, SessionSpec):
        source.kernel(kernel)   # a KeyError naming the kernels there are, before any task
    names = list(grid)
    points = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
    spec_f: Future[SessionSpec] = client.scatter(spec, broadcast=True, hash=True)
    fixed_f: Future[dict[str, Any]] = client.scatter([dict(params)], broadcast=True, hash=False)[0]
    futures = [client.submit(_kernel_task, spec_f, kernel, fixed_f, p, pure=False) for p in points]
    results = client.gather(futures)   # raises the first failure: nothing is dropped silently
    return {tuple(p[n] for n in names): r for p, r in zip(points, results)}


# -- one worker per GPU ------------------------------------------------------------------------------


def local_cuda_cluster(gpus: int | Sequence[int] | None = None, **kwargs: Any) -> Any:
    """A dask_cuda.LocalCUDACluster with one worker (one thread) per GPU: every GPU of this machine,
    the first `gpus` of them, or the listed device ids. Each worker sees its GPU as device 0
    (CUDA_VISIBLE_DEVICES), so a Session(backend="cuda") built there runs on its own GPU; use
    `function(session, name, backend="cuda")` or `SessionSpec.of(session, backend="cuda")`."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as exc:
        raise ImportError("one worker per GPU needs dask-cuda: pip install dask-cuda") from exc
    if isinstance(gpus, int):
        kwargs.setdefault("CUDA_VISIBLE_DEVICES", list(range(gpus)))
    elif gpus is not None:
        kwargs.setdefault("CUDA_VISIBLE_DEVICES", list(gpus))
    kwargs.setdefault("threads_per_worker", 1)
    return LocalCUDACluster(**kwargs)
