"""The module fixture most browser tests start from, written once: a notebook of given cells in a
folder of its own under pytest's basetemp, served by the shared JupyterLab (or Notebook 7) server of
`lab_tools` (conftest.py); the fixture's value is the notebook's URL, its kernels shut down after
the module's tests.

    lab = served_notebook("irlab", CELLS, "ir.ipynb")
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import pytest

__all__ = ["PYTHON_KERNELSPEC", "SLANG_KERNELSPEC", "served_notebook"]

PYTHON_KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
SLANG_KERNELSPEC = {"name": "slang", "display_name": "Slang", "language": "slang"}


def served_notebook(folder: str, cells: Sequence[str], notebook: str, **options: Any) -> Callable[..., Any]:
    """A module-scoped fixture serving `cells` as `notebook` in a fresh folder named after `folder`;
    `options` go to LabTools.jupyterlab (kernelspec=SLANG_KERNELSPEC, app="notebook", ...)."""

    @pytest.fixture(scope="module")
    def served(tmp_path_factory: pytest.TempPathFactory, lab_tools: Any) -> Iterator[str]:
        with lab_tools.jupyterlab(tmp_path_factory.mktemp(folder), cells, notebook, **options) as url:
            yield url

    return served
