"""Run a notebook headless and write the executed copy (what `scripts/lab --execute` runs).

usage: python scripts/execute_notebook.py NOTEBOOK OUTPUT [--timeout SECONDS]

A cell that fails or runs past the limit per cell ends the run with one message that names the
notebook, the cell (its number and first line), what happened and what to do; the copy executed so
far is written either way. The limit: --timeout, else $SLANG_KERNEL_CELL_TIMEOUT, else 600 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

DEFAULT_TIMEOUT = 600


def first_line(cell: nbformat.NotebookNode) -> str:
    lines = [line for line in str(cell.source).splitlines() if line.strip()]
    return (lines[0].strip()[:80] if lines else "(empty)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook")
    parser.add_argument("output")
    parser.add_argument("--timeout", type=int, default=int(os.environ.get("SLANG_KERNEL_CELL_TIMEOUT", DEFAULT_TIMEOUT)),
                        help="seconds a cell may run (default: $SLANG_KERNEL_CELL_TIMEOUT or 600)")
    args = parser.parse_args(argv)
    src, out = args.notebook, args.output
    nb = nbformat.read(src, as_version=4)
    current: dict[str, int] = {}

    def on_cell(cell: nbformat.NotebookNode, cell_index: int) -> None:
        current["index"] = cell_index

    client = NotebookClient(nb, timeout=args.timeout, on_cell_execute=on_cell,
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(src))}})
    rc = 0
    try:
        client.execute(stderr=subprocess.DEVNULL)   # the kernel's own log (a ZMQ error when stopped)
    except (CellTimeoutError, CellExecutionError) as exc:
        i = current.get("index", 0)
        where = f"{src}, cell {i + 1} of {len(nb.cells)} ({first_line(nb.cells[i])!r})"
        if isinstance(exc, CellTimeoutError):
            print(f"{where} was still running after the limit of {args.timeout} s per cell, and was stopped.\n"
                  f"To give each cell longer: SLANG_KERNEL_CELL_TIMEOUT={max(2 * args.timeout, 1200)} "
                  f"scripts/lab --execute {src}\n"
                  f"A notebook with sizes runs its small one (under a minute without a GPU) with: "
                  f"SLANG_KERNEL_QUICK=1 scripts/lab --execute {src}", file=sys.stderr)
        else:
            print(f"{where} failed: {exc.ename}: {exc.evalue}\n"
                  f"The traceback is in the executed copy, {out}, under that cell; open it with scripts/lab.",
                  file=sys.stderr)
        rc = 1
    finally:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        nbformat.write(nb, out)
        print(f"executed notebook written to {out}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
