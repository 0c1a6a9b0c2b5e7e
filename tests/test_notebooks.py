"""Every notebook in notebooks/ executes top to bottom (nbclient) on the CPU backend, the one every
machine has. The default backend (`auto`: a GPU, else software Vulkan) is covered by
tests/test_notebook_budget.py, which runs each notebook as a user does (`jupyter execute`,
`scripts/lab --execute`) and times it; running both here too would cost the suite's 15-minute budget."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_the_cpu(path: Path, cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLANG_KERNEL_BACKEND", "cpu")
    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    monkeypatch.delenv("SLANG_KERNEL_QUICK", raising=False)   # 10, 11 size themselves: small without a GPU
    nb = nbformat.read(path, as_version=4)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    NotebookClient(nb, timeout=300, kernel_name=kernel,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors
