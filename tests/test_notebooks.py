"""Every notebook in notebooks/ executes top to bottom (nbclient), on each backend that works here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
# notebooks whose work does not change with the notebook's backend (the suite's 15-minute budget)
CPU_ONLY = {"08_dask": "its Dask workers run the CPU backend whatever the notebook's is; the cpu run covers it",
            "12_slangtorch_bezier": "slangtorch modules compile to CUDA whatever the notebook's backend; the cpu run "
                                    "covers it (its training cells need torch with CUDA)"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, backend: str, cache_dir: str, open_session: Callable[..., Any],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "vulkan" and path.stem in CPU_ONLY:
        pytest.skip(f"{path.stem}: {CPU_ONLY[path.stem]}")
    if backend == "vulkan":
        open_session("vulkan").close()   # skipped (or failed, where Vulkan is required) if it does not work
    monkeypatch.setenv("SLANG_KERNEL_BACKEND", backend)
    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    monkeypatch.delenv("SLANG_KERNEL_QUICK", raising=False)   # 10, 11 size themselves: small without a GPU
    nb = nbformat.read(path, as_version=4)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    NotebookClient(nb, timeout=300, kernel_name=kernel,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors
