"""What the torch tests (test_torch_autograd, _debug, _ops, _tensors) share: a module's cell on the
conftest `session` (each backend of `--backends`), and the torch device its tensors go on."""

from __future__ import annotations

from typing import Any

import pytest

import slang_kernel as sk
from slang_kernel.backends.registry import info_of

__all__ = ["cell_fixture", "device"]


def cell_fixture(fixture: str, source: str, cell: str) -> Any:
    """A module-scoped fixture named `fixture`: the conftest `session` with `source` run as cell `cell`."""
    @pytest.fixture(scope="module", name=fixture)
    def with_cell(session: sk.Session) -> sk.Session:
        session.run_cell(source, name=cell)
        return session
    return with_cell


def device(s: sk.Session) -> str:
    """The torch device type the session's backend takes tensors on (the backend registry's answer)."""
    return info_of(s.backend.name).torch_device
