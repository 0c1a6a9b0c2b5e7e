"""What the kernel-protocol tests (test_kernel, test_lsp_kernel) ask a started kernel, written once."""

from __future__ import annotations

from typing import Any

__all__ = ["shell_request"]


def shell_request(kc: Any, method: str, *args: Any, timeout: float = 120) -> dict[str, Any]:
    """Send `kc.<method>(*args)` (complete, inspect, is_complete, ...) and return the content of its
    reply, passing over replies to earlier requests."""
    msg_id = getattr(kc, method)(*args)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return dict(reply["content"])
