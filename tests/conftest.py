"""Shared fixtures. `--backends cpu,vulkan,cuda` picks the devices the conformance suite runs on
(default: every backend that works here; CUDA only where a GPU is present)."""

from __future__ import annotations

import os
import signal
from typing import Any, Callable, Iterator, NoReturn

import pytest

import slang_kernel as sk


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backends", default=os.environ.get("SLANG_KERNEL_TEST_BACKENDS", "cpu,vulkan,cuda"),
                     help="comma-separated backends for the conformance suite")


@pytest.fixture(scope="session", autouse=True)
def _sigint_raises_keyboard_interrupt() -> None:
    """A run started in the background by a non-interactive shell (`.ci/run &`) inherits SIGINT
    ignored, and Python then keeps it so; the interrupt tests need Python's own handler, which a
    Jupyter kernel has (and child processes then start with the default again)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh compile cache for the test run, so tests exercise the compiler, not a stale cache."""
    return str(tmp_path_factory.mktemp("slang-cache"))


_SESSIONS: dict[str, sk.Session | BaseException] = {}


def _backend_session(name: str, cache_dir: str) -> sk.Session:
    got = _SESSIONS.get(name)
    if got is None:
        try:
            got = sk.Session(backend=name, cache_dir=cache_dir)
        except sk.BackendUnavailable as exc:
            got = exc
        _SESSIONS[name] = got
    if isinstance(got, BaseException):
        _unavailable(name, got)
    return got


def _unavailable(name: str, exc: BaseException) -> NoReturn:
    """Skip with the reason, except where set-up promised a Vulkan device (then fail)."""
    if name == "vulkan" and os.environ.get("SLANG_KERNEL_REQUIRE_VULKAN") == "1":
        pytest.fail(f"Vulkan is required here (SLANG_KERNEL_REQUIRE_VULKAN=1) but: {exc}")
    pytest.skip(f"{name} backend unavailable: {exc}")


@pytest.fixture(scope="session")
def open_session(cache_dir: str) -> Callable[..., sk.Session]:
    """A new Session on a backend with options (checked=, check_finite=, cache_dir=, ...), skipped like
    `session` where that backend does not work here: the one place tests decide that."""
    def make(backend: str, **options: Any) -> sk.Session:
        options.setdefault("cache_dir", cache_dir)
        try:
            return sk.Session(backend=backend, **options)
        except sk.BackendUnavailable as exc:
            _unavailable(backend, exc)
    return make


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
        wanted = [b.strip() for b in metafunc.config.getoption("--backends").split(",") if b.strip()]
        params = []
        for b in wanted:
            marks = [getattr(pytest.mark, b)] if b in ("vulkan", "cuda") else []
            params.append(pytest.param(b, marks=marks, id=b))
        metafunc.parametrize("backend_name", params, scope="module")


@pytest.fixture(scope="module")
def session(backend_name: str, cache_dir: str) -> Iterator[sk.Session]:
    """A session on one backend; each test adds cells with fresh names (cells persist per module)."""
    yield _backend_session(backend_name, cache_dir)


@pytest.fixture(scope="module")
def vulkan_session(open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    """A Vulkan session of the test module's own (its cells are not another module's), skipped like
    `session`."""
    s = open_session("vulkan")
    yield s
    s.close()


@pytest.fixture()
def cpu_session(cache_dir: str) -> Iterator[sk.Session]:
    s = sk.Session(backend="cpu", cache_dir=cache_dir)
    yield s
    s.close()


@pytest.fixture()
def ipython(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh IPython InteractiveShell with `%load_ext slang_kernel` done (cleared afterwards)."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "slang_kernel")
    yield shell
    InteractiveShell.clear_instance()


# Under pytest-xdist (scripts/test runs `-n 2 --dist loadgroup --no-loadscope-reorder`): each module is
# one work unit, so its module fixtures (an executed notebook, a JupyterLab page) are made once; the
# browser tests are one (they share one JupyterLab server and one Chromium); the notebook runs are
# single tests (they share nothing). Work units go out in this order, the longest first (seconds on the
# 2-core machine, one at a time), so that neither worker is left with a long one at the end.
LONGEST_FIRST = ("tests/browser/", "tests/test_install.py", "tests/test_soak.py", "tests/test_types.py",
                 "tests/test_kernel_notebook.py")
SINGLE_TESTS = ("tests/test_notebooks.py",)


def _rank(nodeid: str) -> int:
    hit = [i for i, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)]
    if hit:
        return hit[0]
    return len(LONGEST_FIRST) + (1 if nodeid.startswith(SINGLE_TESTS) else 0)  # single tests fill the end


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: pytest's order, no groups
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None and not item.nodeid.startswith(SINGLE_TESTS):
            group = "browser" if item.nodeid.startswith("tests/browser/") else item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: the same order in every worker


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for s in _SESSIONS.values():
        if isinstance(s, sk.Session):
            s.close()
