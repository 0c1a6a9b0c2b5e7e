"""Where the time of one edit went: the phases of `run_cell`, from timings taken as it ran.

An edit's wall time is the engine's own work (scanner, imports, request keys, bookkeeping), the
compile cache, the compiler calls' transport (pickling, the socket, waking the worker) and, inside
the worker, each check's steps: loading the imported cells' IR blobs, Slang's parse/check,
serializing the new IR, reflecting its declarations and disassembling it for its references. A
signature edit adds one check per dependent cell; `per_cell` shows them. An edit builds no kernel:
link, emit, the downstream compiler and pipeline creation happen when a kernel is first called
(`ComputeKernel.compiled()`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WORKER_PHASES", "CheckTiming", "EditPhases"]

# the worker's check steps (compiler/_worker.py CHECK_PHASES) and what the user is shown for each
WORKER_PHASES = (("load", "load imports (IR blobs)"), ("check", "parse/check"), ("serialize", "serialize IR"),
                 ("reflect", "reflect declarations"), ("refs", "references (IR disassembly)"),
                 ("teardown", "request tear-down"))


@dataclass(frozen=True)
class CheckTiming:
    """One check as the engine saw it. A batch of checks is one record with the round trip
    (cell "", no worker steps) and one record per item with its worker steps (round trip 0)."""

    cell: str                                  # the checked cell's label ("" for a batch's round trip)
    roundtrip_ms: float                        # waiting for the worker (0 for an item of a batch)
    worker_ms: tuple[tuple[str, float], ...]   # the worker's own steps (WORKER_PHASES keys), wall time
    cache_ms: float = 0.0                      # compile-cache lookups and stores around it
    batched: bool = False                      # ran inside one check_batch call

    @property
    def worker_total(self) -> float:
        return sum(ms for _, ms in self.worker_ms)


@dataclass(frozen=True)
class EditPhases:
    """The phases of one `run_cell` (kept as `session.store.last_edit`, shown by `%slang_profile`)."""

    cell: str
    wall_ms: float
    checks: tuple[CheckTiming, ...]
    rechecked: tuple[str, ...] = ()   # the later cells whose check ran again

    @property
    def compiler_calls(self) -> int:
        """Round trips to the compiler worker (a batch of dependents' checks is one)."""
        return sum(1 for c in self.checks if c.roundtrip_ms > 0)

    @property
    def phases(self) -> tuple[tuple[str, float], ...]:
        """(phase, ms) in the order a check goes; they sum to wall_ms (the engine's share is what the
        other phases leave, so a negative or dominant engine share says the timings disagree)."""
        worker = {k: sum(ms for c in self.checks for n, ms in c.worker_ms if n == k) for k, _ in WORKER_PHASES}
        transport = sum(c.roundtrip_ms for c in self.checks) - sum(worker.values())
        cache = sum(c.cache_ms for c in self.checks)
        measured = [("compile cache", cache), ("transport (ipc)", transport),
                    *((shown, worker[k]) for k, shown in WORKER_PHASES)]
        engine = self.wall_ms - sum(ms for _, ms in measured)
        return (("engine (scanner, imports, keys)", engine), *measured)

    def per_cell(self) -> tuple[tuple[str, float], ...]:
        """Worker time per checked cell, in check order (the edited cell first, then its dependents;
        a cell twice when its check had to run again)."""
        out: dict[str, float] = {}
        for c in self.checks:
            if c.cell:
                out[c.cell] = out.get(c.cell, 0.0) + (c.worker_total or c.roundtrip_ms)
        return tuple(out.items())

    def table(self) -> str:
        """The phases as text: what `%slang_profile` prints."""
        lines = [f"{self.cell}: {self.wall_ms:.1f} ms, {len(self.per_cell())} check(s) in "
                 f"{self.compiler_calls} compiler call(s)"
                 + (f"; rechecked after its interface changed: {', '.join(self.rechecked)}" if self.rechecked else "")]
        for name, ms in self.phases:
            share = 100 * ms / self.wall_ms if self.wall_ms else 0.0
            lines.append(f"  {name:32} {ms:8.2f} ms {share:5.1f}%")
        if len(self.per_cell()) > 1:
            lines.append("  per checked cell (compiler time):")
            lines += [f"    {cell:30} {ms:8.2f} ms" for cell, ms in self.per_cell()]
        return "\n".join(lines)
