"""One compiler call for the dependents of a signature edit, with nothing decided differently.

After a cell's interface changes, `CellChecks.refresh_after` re-checks the later cells one by one,
each against the new revisions before it: one round trip to the compiler worker per cell. Here
the same loop first runs on a scratch copy of the store whose compile service answers every check
as "ok, references every import" without calling the compiler (`PredictingService`), which yields
the requests the real loop will most likely make, keys included (a check's key depends on its
imports' interfaces, which are known before their blobs). `prefetch` sends them in one
"check_batch" call; the worker checks them in order, keeping each new blob under its key so the
next item can import it. The real loop then runs unchanged: `CompileService.check_call` takes a
batched reply only for a request with exactly the same key, and calls the compiler as before
otherwise (a prediction that missed, e.g. a cell whose check drops an unused import), so the
diagnostics, digests and imports of every cell are those the one-by-one loop gives.
"""

from __future__ import annotations

import os
import time
from typing import Any, Sequence

from ..compiled import CompileRequest
from ..compiler.diagnostics import SlangCompilerCrash
from .cell_store import CellStore
from .compile_service import CompileService
from .edit_phases import CheckTiming

__all__ = ["PLACEHOLDER", "PredictingService", "batch_rechecks", "drop_unused", "prefetch", "scratch_store"]


# the blob of a predicted revision (a cell is usable only with a blob); never sent to the worker
PLACEHOLDER = b"predicted: not IR"


def batch_rechecks() -> bool:
    """Whether dependents are re-checked in one call (SLANG_KERNEL_RECHECK_BATCH=0 turns it off: the
    one-by-one calls, for comparing the two in one run, bench/bench_engine.py)."""
    return os.environ.get("SLANG_KERNEL_RECHECK_BATCH", "1") != "0"


def scratch_store(store: CellStore) -> CellStore:
    """A copy of the store's cells to run a prediction on (revisions are frozen: shared, not copied)."""
    copy = CellStore()
    copy.by_name = dict(store.by_name)
    copy.failed = dict(store.failed)
    copy.revision = store.revision
    return copy


class PredictingService(CompileService):
    """The compile service of a scratch store: builds requests as the real one does, records the
    checks, and answers each as a success that references every import (no compiler call)."""

    def __init__(self, real: CompileService, store: CellStore) -> None:
        super().__init__(store, real.compiler, real.cache, real.fingerprint, real.options, real.defines,
                         lambda: real.backend)
        self.variants = dict(real.variants)
        self.requests: list[CompileRequest] = []

    def check_call(self, req: CompileRequest) -> dict[str, Any]:
        self.requests.append(req)
        old = next((c for c in self.store.by_name.values() if c.module == req.module), None)
        return {"ok": True, "diagnostics": "", "blob": PLACEHOLDER, "decls": list(old.decls) if old else [],
                "entry_points": list(old.entry_points) if old else [], "refs": [m for m, _, _ in req.deps]}


def prefetch(service: CompileService, requests: Sequence[CompileRequest]) -> None:
    """Run the predicted checks that the compile cache lacks in one worker call, keeping the replies
    in `service.prefetched` for check_call (fewer than two: nothing to gain, nothing sent)."""
    todo: dict[str, CompileRequest] = {}
    for r in requests:
        if r.key not in todo and r.key not in service.prefetched and service.cache.get_object("cells", r.key) is None:
            todo[r.key] = r
    if len(todo) < 2:
        return
    blobs: dict[str, bytes] = {}
    items = []
    for key, r in todo.items():
        blobs.update((d, b) for d, b in r.blobs.items() if b and b != PLACEHOLDER and d not in todo)   # a batch's own blobs stay in the worker
        msg = r.message()
        del msg["blobs"]
        items.append(dict(msg, digest=key))
    t0 = time.perf_counter()
    try:
        got = service.compiler.call("check_batch", what=f"the {len(items)} cells after an interface change",
                                    blobs=blobs, items=items)
    except (SlangCompilerCrash, RuntimeError):
        return   # the one-by-one checks meet the crash (or the failure) again and blame the right cell
    finally:
        service.spent_ms += (time.perf_counter() - t0) * 1000
    rt = (time.perf_counter() - t0) * 1000
    service.batch_blobs.update(got["kept"])
    service.timings.append(CheckTiming("", rt, (), batched=True))
    for (key, r), reply in zip(todo.items(), got["replies"]):
        service.timings.append(CheckTiming(r.what, 0.0, tuple(reply.get("wall_ms", {}).items()), batched=True))
        if "skipped" not in reply:
            service.prefetched[key] = reply


def drop_unused(service: CompileService) -> None:
    """After the real loop: the worker forgets the blobs a batch left that no current revision (or
    visibility variant) has: replies the loop did not take, and a check it took and then narrowed."""
    if service.batch_blobs:
        current = {c.digest for c in service.store.by_name.values()} | {v.digest for v in service.variants.values()}
        service.compiler.forget([k for k in service.batch_blobs if k not in current])
        service.batch_blobs.clear()
    service.prefetched.clear()
