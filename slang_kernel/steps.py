"""Step: a training step's kernel launches, bound once and replayed without Python work per launch.

A training loop calls the same few kernels with the same device-resident buffers thousands of
times; binding their parameters again at every call is most of the host's time per launch. A Step
takes the launches once (kernel and parameters, as for a call), checks and binds them, and
replays them ``times`` times per call:

    step = Step([(splatTrain, dict(threads=(W, H, 1), target=t, size=(W, H))),
                 (adamUpdate, dict(threads=P, moments=m, count=P))], shared=dict(blobs=b, grads=g))
    step(100)        # 100 training steps

How a backend replays (its "replay" capability): CUDA launches its cached argument blocks, or a CUDA
graph of one step captured through CuPy; Vulkan records every launch of the call into one command
buffer with one submission (in the worker process: one round trip per call, not per launch).
Backends without it (the CPU) dispatch the launches one after another, as calls would; so does
every backend in a checked session (`Session(checked=True)`: each dispatch reads its bounds report)
and with the NaN/Inf finder on (`Session(check_finite=True)` or `Step(..., check_finite=True)`: each
launch is followed by the scan of what it wrote, so a NaN is named with its launch). That choice is
made here, once, when the step is bound; the backends' replays never see a checked session.

Parameters must be device-resident (CuPy arrays, `backend.buffer(...)`, the CPU's shared arrays)
and are used as they are at each replay: the kernels see what earlier launches wrote. Scalars are
fixed when the step is made. Re-running a kernel's cell rebinds the step at its next call.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .backends import Backend, replay
from .backends.registry import REPLAY, capability
from .compiled import CompiledKernel
from .engine.kernels import ComputeKernel

__all__ = ["Launch", "Step"]

Launch = tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]


class Step:
    """Launches replayed as one unit; ``step(times)`` runs them ``times`` times in order."""

    def __init__(self, launches: Sequence[tuple[ComputeKernel, Mapping[str, Any]]],
                 shared: Mapping[str, Any] | None = None, check_finite: bool | None = None) -> None:
        """launches: (kernel, parameters) pairs, parameters as for a call (``threads=``/``groups=``
        included); shared: parameters given to every launch that has them (the globals of a cell).
        check_finite: scan what each launch wrote for NaN/Inf (NonFiniteError names the launch;
        default: the session's check_finite), which dispatches the launches one by one."""
        if not launches:
            raise ValueError("Step(): give at least one (kernel, parameters) pair")
        self._given = [(k, dict(p)) for k, p in launches]
        for i, (k, _) in enumerate(self._given):
            if not isinstance(k, ComputeKernel):
                raise TypeError(f"Step(): launch {i} is {type(k).__name__}, not a ComputeKernel (s.kernel(name))")
        self._shared = dict(shared or {})
        self._check_finite = check_finite
        self._built: list[CompiledKernel] = []
        self._backend: Backend | None = None
        self._replay: Any = None

    def _launches(self) -> list[Launch]:
        out: list[Launch] = []
        for kernel, params in self._given:
            ck = kernel.compiled()
            p = dict(params)
            threads, groups = p.pop("threads", None), p.pop("groups", None)
            names = ck.parameter_names
            p.update({n: v for n, v in self._shared.items() if n in names and n not in p})
            out.append((ck, kernel.checked_groups(ck, threads, groups, p), p))
        return out

    def _current(self) -> bool:
        backend = self._given[0][0].session.backend
        return (self._replay is not None and backend is self._backend
                and all(k.compiled() is ck for (k, _), ck in zip(self._given, self._built)))

    def bind(self) -> None:
        """Check and bind the launches now (the first call does it; a re-run cell makes it again)."""
        launches = self._launches()
        service = self._given[0][0].session
        backend, finite = service.backend, service.finite
        scan = self._check_finite if self._check_finite is not None else finite.enabled
        kernels = [k for k, _ in self._given]
        if scan:
            self._replay = _Sequential(kernels, launches, True)
        elif backend.config.checked or not capability(backend, REPLAY):
            self._replay = _Sequential(kernels, launches, False)
        else:
            self._replay = replay(backend).prepare_step(launches)
        self._backend = backend
        self._built = [ck for ck, _, _ in launches]

    @property
    def mode(self) -> str:
        """How the backend replays the step now: "cuda graph" (once it was captured, at the first
        call), "cached launches", "one command buffer per call", ...; "" before the first call."""
        return str(getattr(self._replay, "mode", "")) if self._replay is not None else ""

    def __call__(self, times: int = 1) -> None:
        if type(times) is not int or times < 0:
            raise ValueError(f"Step(times): a non-negative int; got {times!r}")
        if not self._current():
            self.bind()
        self._replay.run(times)

    def __repr__(self) -> str:
        names = ", ".join(k.name for k, _ in self._given)
        return f"<Step [{names}]{' ' + self.mode if self.mode else ''}>"


class _Sequential:
    """Each launch dispatched as a call would, through ComputeKernel.dispatch_build: the backend's own
    dispatch (checked in a checked session), or the NaN/Inf finder's, which scans what each wrote."""

    def __init__(self, kernels: list[ComputeKernel], launches: list[Launch], scan: bool) -> None:
        self.scan = scan
        self.launches = [(k, ck, g, v) for k, (ck, g, v) in zip(kernels, launches) if 0 not in g]
        self.mode = "one dispatch per launch" + (", each scanned for NaN/Inf" if scan else "")

    def run(self, times: int) -> None:
        scan = self.scan
        for _ in range(times):
            for k, ck, g, v in self.launches:
                k.dispatch_build(ck, g, scan, v)
