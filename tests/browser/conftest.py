"""Shared browser-test helpers (the `lab_tools` fixture): notebooks generated into folders under
pytest's basetemp, served by ONE JupyterLab (and one Notebook 7) server per test session, driven with
Debian's chromium (one browser, a fresh context per page) through Playwright. What a user does on a
page (run cells, answer the app's dialogs, drag a slider...) is in lab_pages.py; tests reach both
through `lab_tools`.

    @pytest.fixture(scope="module")
    def lab(tmp_path_factory, lab_tools):
        with lab_tools.jupyterlab(tmp_path_factory.mktemp("mylab"), CELLS, "my.ipynb") as url:
            yield url

    def test_it(lab, lab_tools):
        with lab_tools.chromium_page("my_failure.png") as page:
            page.goto(lab)
            lab_tools.run_all_cells(page, len(CELLS))
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
from contextlib import ExitStack, contextmanager
from typing import Iterator, Sequence

import pytest

from slang_kernel._server import SERVER_ARG
from tests.waiting import wait_until

# tests/browser is on sys.path (it is no package: pytest puts the folder of its conftest there)
from lab_pages import (CANVAS_STATS, COLOR_SHARES, FPS_JS, NOTEBOOK7_IDLE, dismiss_toasts,
                       drag_slider, drawn_view, open_dialogs, painted, pause, run_all_cells, run_all_menu, run_cell,
                       run_when_connected, set_cell_text, wait_clock, wait_frames, wait_js, wait_kernel_idle,
                       wait_redrawn)
from served import PYTHON_KERNELSPEC, SLANG_KERNELSPEC

REPO = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


# A light 512x512 image kernel (sin/cos per pixel; also timed alone by bench/bench_engine.py)
LIGHT_KERNEL = """
uniform float amp; uniform float t;
RWStructuredBuffer<float4> pixels;
[shader("compute")][numthreads(16, 16, 1)]
void shade(uint3 id : SV_DispatchThreadID) {
    uint2 p = id.xy; if (p.x >= 512 || p.y >= 512) return;
    float2 uv = float2(p) / 512.0;
    float s = 0.5 + 0.5 * sin(20.0 * uv.x + t * 0.002) * cos(14.0 * uv.y - t * 0.001);
    pixels[p.y * 512 + p.x] = float4(amp * s, uv.y, 1.0 - s, 1.0);
}"""

# That kernel bound to a live image on the CPU backend (used by the playground browser test and
# bench/bench_live.py): append a line that shows `view`.
LIVE_CPU_CELL = f'''\
import numpy as np, slang_kernel as sk
from slang_kernel.widgets import live
from slang_kernel.widgets import Slider, Time
cpu = sk.Session(backend="cpu")
cpu.run_cell(r"""{LIGHT_KERNEL}""")
pixels = cpu.backend.zeros((512, 512, 4), np.float32)
view = live(cpu.kernel("shade"), image="pixels", controls={{"amp": Slider(0, 1, 0.8), "t": Time()}},
            values={{"pixels": pixels}}, threads=(512, 512, 1))'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook_json(cells: Sequence[str], kernelspec: dict[str, str] | None,
                   source: pathlib.Path | None) -> dict:
    """nbformat 4 for `cells` (a Python 3 notebook unless `kernelspec` says otherwise), or a copy of the
    notebook `source` with its outputs cleared."""
    if source is not None:
        nb = json.loads(source.read_text())
        for c in nb["cells"]:
            if c["cell_type"] == "code":
                c["outputs"], c["execution_count"] = [], None
        return nb
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                       "outputs": [], "source": src} for i, src in enumerate(cells)],
            "metadata": {"kernelspec": kernelspec or PYTHON_KERNELSPEC}, "nbformat": 4, "nbformat_minor": 5}


class JupyterServer:
    """`jupyter lab` or `jupyter notebook` (Notebook 7) over `root`, with this checkout's kernelspec and
    labextension first on JUPYTER_PATH. Started once per app and shared by the browser tests (a start
    costs seconds of the 2-core CI machine); each test's notebooks live in their own folder under root,
    open in their own JupyterLab workspace and get their kernels shut down when the test is done."""

    def __init__(self, app: str, root: pathlib.Path, jupyter_path: str) -> None:
        if app not in ("lab", "notebook"):
            raise ValueError(f"app must be 'lab' or 'notebook', not {app!r}")
        self.app, self.root = app, root
        self._shutdowns: list[threading.Thread] = []
        settings = root / ".settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "notification.jupyterlab-settings").write_text(
            '{"fetchNews": "false", "checkForUpdates": false}')
        self.port, self.token = _free_port(), secrets.token_hex(16)
        old = os.environ.get("JUPYTER_PATH")
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"),
                   JUPYTER_PATH=jupyter_path + (os.pathsep + old if old else ""))
        jupyter = shutil.which("jupyter", path=str(pathlib.Path(sys.executable).parent)) or "jupyter"
        self.log_path = root / f"{app}-{self.port}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [jupyter, app, "--no-browser", f"--port={self.port}", "--ServerApp.port_retries=0",
             f"--ServerApp.token={self.token}", "--ServerApp.ip=127.0.0.1", "--allow-root",
             f"--ServerApp.root_dir={root}", SERVER_ARG],
            cwd=root, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(self._answers, 60, f"jupyter {app} to answer on port {self.port} (its log: {self.log_path})")
        except BaseException:
            self.close()
            raise

    def _answers(self) -> bool:
        """Whether the server answers its REST API yet; a RuntimeError with its log once it has exited."""
        try:
            self._api("GET", "status")
            return True
        except OSError:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.app} did not start:\n" + self.log_path.read_text()[-3000:])
            return False

    def _api(self, method: str, path: str) -> object:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/{path}?token={self.token}", method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def url(self, notebook: pathlib.Path, workspace: str) -> str:
        """The notebook's page: in JupyterLab in the (fresh) `workspace`, so that no tab of an earlier
        test is restored; in Notebook 7 its /notebooks page."""
        rel = urllib.parse.quote(notebook.relative_to(self.root).as_posix())
        where = f"lab/workspaces/{workspace}/tree" if self.app == "lab" else "notebooks"
        return f"http://127.0.0.1:{self.port}/{where}/{rel}?token={self.token}"

    def shut_down_kernels(self, notebook: pathlib.Path) -> None:
        """End the sessions (and kernels) of `notebook`: a live view left running would use the CPU
        the next tests need. The server waits seconds for a kernel to exit; the next test need not,
        so each request is left to a thread (close() waits for them)."""
        if self.proc.poll() is not None:
            return
        rel = notebook.relative_to(self.root).as_posix()
        sessions = self._api("GET", "sessions")
        assert isinstance(sessions, list)
        for s in sessions:
            if s.get("path") == rel:
                t = threading.Thread(target=self._delete, args=(f"sessions/{s['id']}",), daemon=True)
                t.start()
                self._shutdowns.append(t)

    def _delete(self, path: str) -> None:
        try:
            self._api("DELETE", path)
        except OSError as exc:  # the server going away meanwhile stops the kernel too
            print(f"jupyter {self.app}: DELETE {path}: {exc}")

    def close(self) -> None:
        for t in self._shutdowns:
            t.join(timeout=15)
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the session started above: server + its kernels
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._log.close()


class LabTools:
    """What browser tests need from here (tests/browser is not a package, so no relative imports):
    the `lab_tools` fixture, one per test session. It holds the shared servers (one `jupyter lab`, one
    `jupyter notebook`, each started on first use) and one Chromium (a fresh context per page), all
    closed once the browser tests are done (pytest_runtest_teardown below) and started again if a
    later browser test needs them."""

    ARTIFACTS = ARTIFACTS
    REPO = REPO
    CANVAS_STATS = CANVAS_STATS
    COLOR_SHARES = COLOR_SHARES
    FPS_JS = FPS_JS
    LIVE_CPU_CELL = LIVE_CPU_CELL
    CHROMIUM = CHROMIUM
    CHROMIUM_ARGS = CHROMIUM_ARGS
    PYTHON_KERNELSPEC = PYTHON_KERNELSPEC
    SLANG_KERNELSPEC = SLANG_KERNELSPEC
    dismiss_toasts = staticmethod(dismiss_toasts)
    drag_slider = staticmethod(drag_slider)
    drawn_view = staticmethod(drawn_view)
    wait_js = staticmethod(wait_js)
    wait_frames = staticmethod(wait_frames)
    wait_clock = staticmethod(wait_clock)
    wait_redrawn = staticmethod(wait_redrawn)
    painted = staticmethod(painted)
    pause = staticmethod(pause)
    run_all_cells = staticmethod(run_all_cells)
    run_all_menu = staticmethod(run_all_menu)
    run_cell = staticmethod(run_cell)
    run_when_connected = staticmethod(run_when_connected)
    wait_kernel_idle = staticmethod(wait_kernel_idle)
    NOTEBOOK7_IDLE = NOTEBOOK7_IDLE
    set_cell_text = staticmethod(set_cell_text)

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root  # pytest's basetemp: tmp_path_factory.mktemp folders are under it
        self._servers: dict[str, JupyterServer] = {}
        self._stack = ExitStack()
        self._jupyter_path: str | None = None
        self._browser: object | None = None
        self._opened = 0

    @staticmethod
    def _need_browser() -> None:
        if not pathlib.Path(CHROMIUM).exists():
            pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
        pytest.importorskip("playwright.sync_api")

    def server(self, app: str = "lab") -> JupyterServer:
        """The shared `jupyter lab` (app="lab") or Notebook 7 (app="notebook") server over root."""
        self._need_browser()
        if app == "notebook":
            pytest.importorskip("notebook", minversion="7", reason="Notebook 7 is a test dependency (pip install notebook)")
        if app not in self._servers:
            if self._jupyter_path is None:
                from slang_kernel.frontend.kernel.install import install

                # this checkout's kernelspec and labextension, in a prefix of their own, so a stale copy
                # elsewhere cannot stand in for them; the kernel gets a fresh IPYTHONDIR
                prefix = pathlib.Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="slang-kernelspec-")))
                install(prefix=str(prefix), env={"IPYTHONDIR": str(prefix / "ipython")})
                self._jupyter_path = str(prefix / "share" / "jupyter")
            self._servers[app] = JupyterServer(app, self.root, self._jupyter_path)
        return self._servers[app]

    @contextmanager
    def jupyterlab(self, root: pathlib.Path | None, cells: Sequence[str] = (), notebook: str = "test.ipynb",
                   kernelspec: dict[str, str] | None = None, *, source: pathlib.Path | None = None,
                   app: str = "lab") -> Iterator[str]:
        """Write a notebook of `cells` (a Python 3 notebook unless `kernelspec` says otherwise), or a copy
        of the notebook `source` without its outputs, as `root`/`notebook` (root: a folder under
        pytest's basetemp, e.g. tmp_path_factory.mktemp(...); None: a fresh one), and yield its URL on
        the shared server of `app` ("lab": JupyterLab, "notebook": Notebook 7). Several notebooks may
        share a root. On exit the notebook's kernels are shut down; the server stays for the next test."""
        if root is None:
            root = pathlib.Path(tempfile.mkdtemp(prefix="nb-", dir=self.root))
        root = root.resolve()
        if self.root.resolve() not in root.parents:
            raise ValueError(f"jupyterlab(root={root}): the notebook folder must be under {self.root} "
                             "(use tmp_path_factory.mktemp(...) or tmp_path), where the shared server serves")
        server = self.server(app)
        path = root / notebook
        path.write_text(json.dumps(_notebook_json(cells, kernelspec, source)))
        self._opened += 1
        try:
            yield server.url(path, f"t{self._opened}")
        finally:
            server.shut_down_kernels(path)

    @contextmanager
    def chromium_page(self, failure_shot: str, width: int = 1400, height: int = 1000) -> Iterator["object"]:
        """A page in a fresh context (no cookies, storage or cache of another test) of the shared headless
        Debian Chromium; on an exception, a full-page screenshot goes to artifacts/`failure_shot`."""
        self._need_browser()
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            playwright = self._stack.enter_context(sync_playwright())
            self._browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            self._stack.callback(self._browser.close)
        ARTIFACTS.mkdir(exist_ok=True)
        context = self._browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            try:
                yield page
            except Exception as e:
                page.screenshot(path=str(ARTIFACTS / failure_shot), full_page=True)
                for text in open_dialogs(page):
                    e.add_note(f"a JupyterLab dialog was open: {text!r}")
                for server in self._servers.values():   # a kernel that died or timed out says so here
                    tail = server.log_path.read_text(errors="replace").splitlines()[-25:]
                    e.add_note(f"the end of {server.log_path}:\n" + "\n".join(tail))
                raise
        finally:
            context.close()

    def close(self) -> None:
        """Stop the browser and the servers (their kernels with them)."""
        servers, self._servers = list(self._servers.values()), {}
        try:
            for s in servers:
                s.close()
        finally:
            self._browser, self._jupyter_path = None, None
            self._stack.close()
            self._stack = ExitStack()


_TOOLS = pytest.StashKey[LabTools]()


@pytest.fixture(scope="session")
def lab_tools(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabTools]:
    tools = LabTools(tmp_path_factory.getbasetemp())
    request.config.stash[_TOOLS] = tools
    yield tools
    tools.close()
    del request.config.stash[_TOOLS]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """After the last browser test in a row (the module fixtures' exits done), stop the shared servers
    and Chromium: their memory and CPU go back to the rest of the suite."""
    try:
        return (yield)
    finally:
        tools = item.config.stash.get(_TOOLS, None)
        here = pathlib.Path(__file__).parent
        if tools is not None and (nextitem is None or here not in nextitem.path.parents):
            tools.close()
