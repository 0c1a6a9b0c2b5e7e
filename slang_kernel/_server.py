"""Jupyter Server tuning for live widgets.

jupyter_server leaves Nagle's algorithm on for the kernel websocket, so a small message written while
earlier data is unacknowledged waits for the browser's delayed ACK (~40 ms): a live image's frame
requests and replies pay that on most frames. This connection class (a documented, configurable
ServerApp trait) turns it off:

    jupyter lab --ServerApp.kernel_websocket_connection_class=slang_kernel._server.NoDelayConnection

scripts/lab, binder/ and the browser tests use it.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

__all__ = ["NoDelayConnection", "SERVER_ARG"]

SERVER_ARG = "--ServerApp.kernel_websocket_connection_class=slang_kernel._server.NoDelayConnection"


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """The standard kernel websocket connection with TCP_NODELAY set on its socket."""

    def connect(self) -> Any:
        self.websocket_handler.set_nodelay(True)
        return super().connect()
