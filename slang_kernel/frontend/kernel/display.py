"""The kernel's own error types; the display itself is shared with the magic (slang_kernel.frontend.display)."""

from __future__ import annotations

from ..display import CODE_LANGUAGES, CellSummary, code_display, error_lines, summary

__all__ = ["CODE_LANGUAGES", "CellSummary", "KernelInterrupted", "SlangKernelError", "code_display",
           "error_lines", "summary"]


class SlangKernelError(Exception):
    """A usage error of a kernel line magic (%run, %show, %backend): shown as its message only."""


class KernelInterrupted(KeyboardInterrupt):
    """An interrupt (stop button) during a compile or a dispatch: says what was interrupted."""


