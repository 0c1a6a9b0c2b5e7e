"""Shared browser-test helpers (the `lab_tools` fixture): notebooks generated into folders under
pytest's basetemp, served by ONE JupyterLab (and one Notebook 7) server per test session, driven with
Debian's chromium (one browser, a fresh context per page) through Playwright.

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
import time
import urllib.parse
import urllib.request
import warnings
from contextlib import ExitStack, contextmanager
from typing import Iterator, Sequence

import pytest

from slang_kernel._server import SERVER_ARG

REPO = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PYTHON_KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
SLANG_KERNELSPEC = {"name": "slang", "display_name": "Slang", "language": "slang"}


CANVAS_STATS = """(c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let h = 0, nonbg = 0; const colors = new Set();
  for (let i = 0; i < d.length; i += 4) {
    if (!(d[i] === 34 && d[i+1] === 34 && d[i+2] === 34)) nonbg++;
    if (i % 64 === 0) colors.add((d[i] << 16) | (d[i+1] << 8) | d[i+2]);
    h = (h * 31 + d[i] + 7 * d[i+1] + 13 * d[i+2]) >>> 0;
  }
  return {hash: h, nonbg, colors: colors.size};
}"""

# frames drawn in 5 s, and per-stage medians (ms) from the page's per-frame timestamps
# (root.__skStats; Python and the page share one wall clock): up = request -> Python handler,
# python = render + encode, down = Python -> page, draw = (JPEG decode +) tone map + draw.
FPS_JS = """(root) => new Promise((done) => {
  const f0 = Number(root.dataset.frames), rtt = [], s = root.__skStats || [], n0 = s.length;
  const poll = setInterval(() => rtt.push(Number(root.dataset.rttMs)), 100);
  const med = (xs) => { xs = xs.filter((x) => x === x).sort((a, b) => a - b); return xs.length ? Math.round(10 * xs[xs.length >> 1]) / 10 : null; };
  setTimeout(() => {
    clearInterval(poll);
    const r = s.slice(n0);
    done({frames: Number(root.dataset.frames) - f0, rtt_median: med(rtt),
          stages: {up: med(r.map((x) => x.pyRecv - x.req)), python: med(r.map((x) => x.pySent - x.pyRecv)),
                   render: med(r.map((x) => x.render)), down: med(r.map((x) => x.recv - x.pySent)),
                   draw: med(r.map((x) => x.drawn - x.start)), kb: med(r.map((x) => x.bytes / 1024))}});
  }, 5000);
})"""


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
            deadline = time.time() + 60
            while True:
                try:
                    self._api("GET", "status")
                    break
                except OSError:
                    if self.proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"jupyter {app} did not start:\n" + self.log_path.read_text()[-3000:])
                    time.sleep(0.3)
        except BaseException:
            self.close()
            raise

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


def answer_dialog(page) -> bool:
    """Answer the JupyterLab dialog in front of the notebook, if one is open, as a user would; True if
    one was. What the app asks, and why, goes to the test's warnings (the CI log lists them).

    - "Select Kernel": the notebook's kernel preselected is accepted. With no kernel to choose from
      (the app asked before its list of kernelspecs was in), the dialog is closed and asked again from
      the toolbar's kernel name, where the list is in by then.
    - Anything else ("Kernel Restarting": a kernel died and the server restarts it; "Error Starting
      Kernel"): its OK. A kernel that keeps dying still fails the test: the cell never runs."""
    dialog = page.locator(".jp-Dialog").first
    if dialog.count() == 0:
        return False
    title = dialog.locator(".jp-Dialog-header").inner_text().strip()
    if title == "Select Kernel" and dialog.locator("select").evaluate("(s) => s.value") == "null":
        dialog.locator(".jp-mod-reject").click()
        page.locator(".jp-Toolbar-kernelName").first.click()
    else:
        if title != "Select Kernel":
            warnings.warn(f"JupyterLab asked: {dialog.inner_text().strip()!r}; answered OK", stacklevel=2)
        dialog.locator(".jp-mod-accept").click()
    return True


LAB_IDLE = "text=| Idle"   # JupyterLab's status bar
NOTEBOOK7_IDLE = ".jp-Notebook-ExecutionIndicator[data-status=idle]"   # Notebook 7 has no status bar


def wait_kernel_idle(page, timeout_s: float = 60, idle: str = LAB_IDLE) -> None:
    """Wait until the page shows the notebook's kernel idle (`idle`: where), answering its dialogs."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    deadline = time.monotonic() + timeout_s
    while True:
        answered = answer_dialog(page)
        try:
            page.locator(idle).first.wait_for(timeout=2_000)
            if not answered and page.locator(".jp-Dialog").count() == 0:
                return
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, f"the kernel was not idle within {timeout_s} s"


def run_all_cells(page, n: int, timeout: int = 60_000) -> None:
    """Open the notebook's kernel and run its `n` cells one by one (Shift+Enter), waiting for each."""
    wait_kernel_idle(page)
    cells = page.locator(".jp-Notebook .jp-Cell")
    for i in range(n):
        cells.nth(i).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_function(
            "(c) => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt').textContent)",
            arg=cells.nth(i).element_handle(), timeout=timeout)


def run_all_menu(page, timeout: int = 180_000) -> None:
    """Run > Run All Cells, as a user would, then wait until every code cell has its prompt number
    (live views keep the kernel flipping between busy and idle, so its status says nothing)."""
    wait_kernel_idle(page)
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    page.wait_for_function(
        "() => { const p = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];"
        " return p.length > 0 && p.every((e) => /\\[\\d+\\]/.test(e.textContent)); }", timeout=timeout)


def set_cell_text(page, cell, text: str) -> None:
    """Replace a cell's text as a user would (select all in its editor, then type it in one go)."""
    editor = cell.locator(".jp-InputArea-editor")
    editor.scroll_into_view_if_needed()
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)
    got = cell.locator(".cm-content").evaluate(
        "(e) => [...e.querySelectorAll('.cm-line')].map((l) => l.textContent).join('\\n')")
    assert got.strip() == text.strip(), f"the editor holds {got[:200]!r}"


def run_cell(page, cell, timeout: int = 120_000) -> float:
    """Shift+Enter in `cell` and wait until its prompt shows a new number; returns the page's
    performance.now() (ms) when the run was seen to end."""
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.inner_text()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        "([c, b]) => { const t = c.querySelector('.jp-InputPrompt').textContent;"
        " return /\\[\\d+\\]/.test(t) && t !== b; }", arg=[cell.element_handle(), before], timeout=timeout)
    return float(page.evaluate("() => performance.now()"))


# Shares of a canvas's image pixels (not the #222 background) by hue class, for "did the colour change"
COLOR_SHARES = """(c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; const k = {red: 0, green: 0, blue: 0, orange: 0};
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i+1], b = d[i+2];
    if (r === 34 && g === 34 && b === 34) continue;
    n++;
    if (r > 150 && g < 60 && b < 60) k.red++;
    if (g > 150 && r < 100 && b < 120) k.green++;
    if (b > 150 && r < 60 && g < 60) k.blue++;
    if (r > 200 && g > 60 && g < 150 && b < 80) k.orange++;
  }
  for (const key in k) k[key] = n ? k[key] / n : 0;
  k.pixels = n;
  return k;
}"""


def _dialogs(page) -> list[str]:
    """The text of every JupyterLab dialog open in `page` (a dialog in front of the cells is what a failed
    click reports only as "intercepts pointer events")."""
    try:
        return [d.inner_text(timeout=1_000) for d in page.locator(".jp-Dialog").all()]
    except Exception as e:   # the page may be gone: the note is a help, never a second failure
        return [f"(could not read: {e})"]


def drag_slider(page, slider, start: float, stop: float, steps: int = 10) -> None:
    """Drag a range input's thumb from fraction `start` to `stop` of its width, as a user would."""
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * stop, y, steps=steps)
    page.mouse.up()


def dismiss_toasts(page) -> None:
    """Click "No" on JupyterLab's news toasts (they cover the bottom right corner of screenshots)."""
    for b in page.locator(".jp-toast-button:has-text('No')").all():
        b.click()


def wait_js(page, predicate: str, loc, timeout: int = 60_000) -> None:
    """Wait until `predicate(element)` holds in the page for the element `loc` points at now."""
    page.wait_for_function(predicate, arg=loc.element_handle(), timeout=timeout)


def drawn_view(page, where, frames: int = 0):
    """The live view (`.sk-img`) in `where` (a cell or its output area), once it has drawn more than
    `frames` frames."""
    view = where.locator(".sk-img")
    view.wait_for(timeout=60_000)
    wait_js(page, f"(e) => Number(e.dataset.frames) > {frames}", view)
    return view


# a cell's prompt shows it queued ([*]) or run ([n])
QUEUED_OR_RUN = "(c) => /\\[(\\d+|\\*)\\]/.test(c.querySelector('.jp-InputPrompt').textContent)"


def run_when_connected(page, cell, deadline_s: float = 90) -> None:
    """Shift+Enter in `cell` until its prompt shows it queued or run. Notebook 7 says nowhere when the
    kernel is connected, and a Shift+Enter before that runs nothing, so the cell is sent again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + deadline_s
    while True:
        if answer_dialog(page):
            assert time.monotonic() < deadline, "the cell never ran: the app kept asking (see the warnings)"
            continue
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(QUEUED_OR_RUN, arg=cell.element_handle(), timeout=5_000)
            return
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, "the cell never ran: no kernel connected"


def pause(page, view) -> None:
    """Click a live view's pause and wait for the view that replaces it: pausing refreshes the saved
    PNG by re-displaying the widget, and the old view (detached, never disposed of) stops."""
    before = view.element_handle()
    view.locator(".sk-play").click()
    page.wait_for_function("(e) => !e.isConnected", arg=before)


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
                from slang_kernel.kernel.install import install

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
                for text in _dialogs(page):
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
