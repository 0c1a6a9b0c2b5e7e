"""slang_kernel._ipc: the framing, crash reasons and process lifecycle both workers share."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from slang_kernel import _ipc

PACKAGE = Path(_ipc.__file__).resolve().parent

# A worker in the shape of the real ones: started by path, _ipc imported as a file, one reply per
# request. {"op": "echo", ...} answers the message; {"op": "signal", "n": N} kills itself with N.
ECHO_WORKER = f"""
import os, sys
sys.path.insert(0, {str(PACKAGE)!r})
import _ipc

channel = _ipc.connect_to_parent()
while channel is not None:
    try:
        msg = channel.recv()
    except EOFError:
        break
    if msg["op"] == "signal":
        os.kill(os.getpid(), msg["n"])
    elif msg["op"] == "exit":
        sys.exit(msg["status"])
    elif msg["op"] == "half":  # a frame cut short, then death
        data = _ipc.frame({{"big": b"x" * 1000}})
        channel.sock.sendall(data[:100])
        os._exit(0)
    else:
        channel.send(msg)
"""


@pytest.fixture()
def pair() -> Iterator[tuple[_ipc.Channel, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield _ipc.Channel(a), b
    a.close()
    b.close()


@pytest.fixture()
def echo(tmp_path: Path) -> Iterator[_ipc.WorkerProcess]:
    script = tmp_path / "echo_worker.py"
    script.write_text(textwrap.dedent(ECHO_WORKER))
    w = _ipc.WorkerProcess((sys.executable, "-S", str(script)))
    w.start()
    yield w
    w.kill()


def roundtrip(w: _ipc.WorkerProcess, msg: Any) -> Any:
    assert w.channel is not None
    w.channel.send(msg)
    return w.channel.recv(time.monotonic() + 10)


# -- framing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("msg", [
    {},
    {"op": "run", "groups": (1, 2, 3), "params": b"\0" * 17, "flush": True},
    {"blobs": {"d" * 64: bytes(range(256)) * 4096}},           # 1 MiB: many recv calls
    [None, 1.5, "ünïcode", {"nested": [1, (2, 3)]}],
], ids=["empty", "run", "1MiB", "nested"])
def test_frames_round_trip(pair: tuple[_ipc.Channel, socket.socket], msg: Any) -> None:
    channel, other = pair
    peer = _ipc.Channel(other)
    for a, b in ((peer, channel), (channel, peer)):  # both ways
        sender = threading.Thread(target=a.send, args=(msg,))  # 1 MiB does not fit the socket buffer
        sender.start()
        assert b.recv(time.monotonic() + 10) == msg
        sender.join()


def test_frame_layout_is_length_then_pickle() -> None:
    data = _ipc.frame({"op": "ping"})
    (n,) = struct.unpack("<Q", data[:8])
    assert n == len(data) - 8 and pickle.loads(data[8:]) == {"op": "ping"}


def test_messages_back_to_back_stay_apart(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.sendall(b"".join(_ipc.frame({"i": i}) for i in range(100)))
    assert [channel.recv()["i"] for _ in range(100)] == list(range(100))


def test_a_clean_end_is_channel_closed(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.close()
    with pytest.raises(_ipc.ChannelClosed, match="closed its end") as info:
        channel.recv()
    assert not isinstance(info.value, _ipc.TruncatedFrame)
    assert isinstance(info.value, EOFError)  # what the clients catch


@pytest.mark.parametrize("cut, where", [(3, "3 bytes into the 8-byte header"), (50, "42 bytes into a 225-byte frame")])
def test_a_truncated_frame_says_so(pair: tuple[_ipc.Channel, socket.socket], cut: int, where: str) -> None:
    channel, other = pair
    data = _ipc.frame({"blob": b"x" * 200})
    assert len(data) == 8 + 225
    other.sendall(data[:cut])
    other.close()
    with pytest.raises(_ipc.TruncatedFrame) as info:
        channel.recv()
    assert str(info.value) == f"the stream ended {where}: the worker died while sending"


def test_a_wild_length_is_a_framing_error(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.sendall(b"garbage!" + b"x" * 8)  # what a stray print on the protocol stream would look like
    with pytest.raises(_ipc.FramingError, match="the stream is corrupt"):
        channel.recv()


def test_an_undecodable_frame_is_a_framing_error(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.sendall(struct.pack("<Q", 5) + b"hello")
    with pytest.raises(_ipc.FramingError, match="could not decode a 5-byte frame"):
        channel.recv()


def test_the_deadline_raises_timeout(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.sendall(_ipc.frame({"x": 1})[:4])
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="4 of 8 header bytes"):
        channel.recv(time.monotonic() + 0.2)
    assert time.monotonic() - t0 < 5


def test_sending_to_a_closed_peer_is_channel_closed(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    other.close()
    with pytest.raises(_ipc.ChannelClosed, match="the worker is gone"):
        for _ in range(100):  # the first sends may still fit the buffer
            channel.send({"pad": b"x" * 65536})


def test_file_descriptors_travel_beside_messages(pair: tuple[_ipc.Channel, socket.socket]) -> None:
    channel, other = pair
    peer = _ipc.Channel(other)
    r, w = os.pipe()
    try:
        channel.send({"op": "map"})
        channel.send_fds([r])
        assert peer.recv() == {"op": "map"}
        (got,) = peer.recv_fds(1)
        os.write(w, b"through the socket")
        assert os.read(got, 100) == b"through the socket"
        os.close(got)
    finally:
        os.close(r)
        os.close(w)


# -- crash reasons -----------------------------------------------------------------------------------


@pytest.mark.parametrize("code, oom, text, name", [
    (-signal.SIGSEGV, False, "killed by SIGSEGV", "SIGSEGV"),
    (-signal.SIGABRT, False, "aborted with SIGABRT", "SIGABRT"),
    (-signal.SIGFPE, False, "killed by SIGFPE: an arithmetic fault such as an integer division by zero", "SIGFPE"),
    (-signal.SIGKILL, False, "killed by SIGKILL: from outside, or by the out-of-memory killer", "SIGKILL"),
    (-signal.SIGKILL, True, "ran out of memory: the out-of-memory killer stopped it", "SIGKILL"),
    (-63, False, "killed by signal 63", "signal 63"),
    (3, False, "exited with status 3", ""),
    (0, False, "exited", ""),
    (None, False, "no reply, and it did not exit", ""),
])
def test_crash_reasons_read_well(code: int | None, oom: bool, text: str, name: str) -> None:
    reason = _ipc.CrashReason(code, oom)
    assert str(reason) == text
    assert reason.signal == name


# -- the process -------------------------------------------------------------------------------------


def test_worker_serves_and_closes(echo: _ipc.WorkerProcess) -> None:
    assert roundtrip(echo, {"op": "echo", "x": [1, 2]}) == {"op": "echo", "x": [1, 2]}
    proc = echo.proc
    assert proc is not None
    echo.close()
    assert proc.returncode == 0 and echo.pid is None and not echo.alive()


@pytest.mark.parametrize("sig, text", [(signal.SIGSEGV, "killed by SIGSEGV"), (signal.SIGABRT, "aborted with SIGABRT"),
                                       (signal.SIGKILL, "killed by SIGKILL")])
def test_a_worker_killed_by_a_signal_gives_its_reason(echo: _ipc.WorkerProcess, sig: int, text: str) -> None:
    assert echo.channel is not None
    echo.channel.send({"op": "signal", "n": int(sig)})
    with pytest.raises(_ipc.ChannelClosed):
        echo.channel.recv(time.monotonic() + 10)
    reason = echo.death()
    assert reason.signal == signal.Signals(sig).name
    assert str(reason).startswith(text)


def test_a_worker_that_exits_gives_its_status(echo: _ipc.WorkerProcess) -> None:
    assert echo.channel is not None
    echo.channel.send({"op": "exit", "status": 7})
    with pytest.raises(EOFError):
        echo.channel.recv(time.monotonic() + 10)
    assert str(echo.death()) == "exited with status 7"


def test_a_worker_dying_mid_frame_is_a_truncated_frame(echo: _ipc.WorkerProcess) -> None:
    assert echo.channel is not None
    echo.channel.send({"op": "half"})
    with pytest.raises(_ipc.TruncatedFrame, match="92 bytes into a"):
        echo.channel.recv(time.monotonic() + 10)


def test_restart_replaces_a_dead_worker(echo: _ipc.WorkerProcess) -> None:
    first = echo.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert echo.proc is not None
    echo.proc.wait()
    echo.ensure()  # died while idle: replaced
    assert echo.pid != first and echo.restarts == 1
    assert roundtrip(echo, {"op": "echo"}) == {"op": "echo"}


def test_the_worker_ignores_sigint(echo: _ipc.WorkerProcess) -> None:
    assert roundtrip(echo, {"op": "echo"}) == {"op": "echo"}  # serving: past connect_to_parent
    assert echo.pid is not None
    with open(f"/proc/{echo.pid}/status") as f:   # SigIgn: the mask of ignored signals, in hex
        ignored = int(next(line for line in f if line.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGINT - 1)), "the worker does not ignore SIGINT"
    os.kill(echo.pid, signal.SIGINT)  # as Jupyter's interrupt reaches the whole process group
    # no wait: a signal sent before the request is handled before the worker runs again to answer it
    assert roundtrip(echo, {"op": "echo", "n": 2}) == {"op": "echo", "n": 2} and echo.alive()


def test_the_cpu_worker_starts_without_the_package() -> None:
    """The CPU worker imports _ipc as a file, not slang_kernel (numpy and all): its start stays cheap."""
    from slang_kernel.backends.cpu.process import WorkerProcess as _WorkerProcess

    w = _WorkerProcess()
    w.start()
    try:
        assert roundtrip(w, {"op": "ping"})["libraries"] == 0
        maps = Path(f"/proc/{w.pid}/maps").read_text()
        assert "numpy" not in maps and "site-packages" not in maps
    finally:
        w.close()
