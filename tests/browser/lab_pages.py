"""What a user does on a JupyterLab or Notebook 7 page, as Playwright steps (open the kernel and
answer the app's dialogs, run cells, type into an editor, drag a slider, wait for a live view), and the
JavaScript that measures what a page draws. Tests reach these through the `lab_tools` fixture
(conftest.LabTools); conftest keeps the servers and the browser."""

from __future__ import annotations

import time
import warnings


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
            pass
        assert time.monotonic() < deadline, f"the kernel was not idle within {timeout_s} s (see the warnings)"


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


def open_dialogs(page) -> list[str]:
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


def wait_frames(page, view, more: int = 1, timeout: int = 30_000) -> None:
    """Wait until the live view `view` has drawn `more` frames beyond those it has drawn now."""
    n = int(view.get_attribute("data-frames") or 0)
    wait_js(page, f"(e) => Number(e.dataset.frames) >= {n + more}", view, timeout)


# a live view's clock: its time control's label, "t = N ms" (null without one)
CLOCK_MS = ("(e) => { const m = /t = (\\d+) ms/.exec(e.querySelector('.sk-ctl-time').textContent);"
            " return m ? Number(m[1]) : null; }")


def wait_clock(page, view, ms: float, since: float | None = None, timeout: int = 30_000) -> None:
    """Wait until the live view's clock reads more than `since` (default: what it reads now) + `ms`."""
    t0 = view.evaluate(CLOCK_MS) if since is None else since
    page.wait_for_function(f"(e) => ({CLOCK_MS})(e) > {float(t0) + ms}", arg=view.element_handle(),
                           timeout=timeout)


def wait_redrawn(page, canvas, before: dict, timeout: int = 30_000) -> dict:
    """Wait until `canvas` shows other pixels than `before` (a CANVAS_STATS result: the image changed)
    and return its CANVAS_STATS then; a Playwright TimeoutError when it does not change in time."""
    page.wait_for_function(f"(c) => ({CANVAS_STATS})(c).hash !== {int(before['hash'])}",
                           arg=canvas.element_handle(), timeout=timeout)
    return canvas.evaluate(CANVAS_STATS)


def painted(page) -> None:
    """Wait until the page has painted twice more: what a scroll or a style change needs before a
    screenshot shows it."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")


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
