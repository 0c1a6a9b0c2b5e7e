"""Bad Slang never takes the notebook down.

- tests/data/bad_cells/hand/: hand-written malformed or ill-typed cells;
  tests/data/bad_cells/gen/: mutants of the valid cells in seeds/ (deleted tokens, swapped types,
  truncation, ...; regenerate with make_corpus.py). All are compiled in ONE session: each yields a
  SlangCompileError with an error Diagnostic that has a cell and a line (or a clean
  SlangCompilerCrash), the session is unchanged, and a valid cell afterwards still works.
- tests/data/crashers/: inputs that crash (or internally fail) the compiler: a regression corpus.
- parse_diagnostics and render_diagnostics never raise, whatever the compiler prints (hypothesis).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slang_kernel as sk
from slang_kernel.compiler.diagnostics import Diagnostic, parse_diagnostics, render_diagnostics

DATA = Path(__file__).parent / "data"
BAD = sorted((DATA / "bad_cells" / "hand").glob("*.slang")) + sorted((DATA / "bad_cells" / "gen").glob("*.slang"))
CRASHERS = sorted((DATA / "crashers").glob("*.slang"))
# Known bugs outside this corpus's reach, each with its reason (strict: the test says when it is fixed).
KNOWN: dict[str, str] = {}  # corpus entries with a known, unfixed problem: stem -> reason (strict xfail)

VALID = """
[shader("compute")][numthreads(16, 1, 1)]
void after_corpus(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform float k)
{ o[t.x] = k * t.x; }
"""


def test_corpus_is_big_enough() -> None:
    assert len(BAD) >= 200
    assert any(p.name.startswith("seed_") for p in CRASHERS)


@pytest.fixture(scope="module")
def one_session():
    s = sk.Session(backend="cpu", cache=False)
    s.run_cell("float corpus_base(float x) { return x + 1; }", name="base")
    yield s
    s.close()


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(reason=KNOWN[p.stem], strict=True))
                                  if p.stem in KNOWN else p for p in BAD], ids=[p.stem for p in BAD])
def test_bad_cell_gives_located_diagnostics(one_session: sk.Session, path: Path) -> None:
    s = one_session
    cells, revision = s.cells, s.store.revision
    with pytest.raises(sk.SlangCompileError) as info:
        s.run_cell(path.read_text(), name="bad")
    err = info.value
    assert s.cells == cells and s.store.revision == revision   # nothing changed
    if isinstance(err, sk.SlangCompilerCrash):
        assert "restarted" in str(err)
        return
    located = [d for d in err.errors if d.cell == "bad" and d.line > 0]
    assert located, f"no located error for {path.name}: {err.diagnostics}"
    assert err.render()  # renders with carets without raising


@pytest.mark.parametrize("path", CRASHERS, ids=[p.stem for p in CRASHERS])
def test_crashers_cost_one_cell(one_session: sk.Session, path: Path) -> None:
    s = one_session
    cells = s.cells
    with pytest.raises(sk.SlangCompileError) as info:
        s.run_cell(path.read_text(), name="crasher")
    assert s.cells == cells
    if path.stem.startswith("seed_"):
        assert isinstance(info.value, sk.SlangCompilerCrash)
    assert s.function("corpus_base")(np.float32(1)) == 2.0   # the compiler (restarted) still works


def test_valid_cell_after_the_corpus(one_session: sk.Session) -> None:
    s = one_session
    s.run_cell(VALID, name="valid")
    o = np.zeros(16, np.float32)
    s.kernel("after_corpus")(threads=16, o=o, k=2.0)
    np.testing.assert_array_equal(o, 2 * np.arange(16))
    assert s.function("corpus_base")(np.float32(41)) == 42.0


# -- the diagnostics parser ------------------------------------------------------------------------

_field = st.text(alphabet=st.characters(blacklist_characters="\t\n\r"), max_size=12)
_num = st.one_of(st.integers(-5, 10**6).map(str), _field)
_severity = st.sampled_from(["error", "warning", "note", "span", "internal", "fatal error", "fatal", "", "E"])
_line = st.one_of(
    st.tuples(st.sampled_from(["E30019", "W1", "", "E31106", "X"]), _severity, _field, _num, _num, _num, _num,
              st.text(max_size=40)).map("\t".join),
    st.text(max_size=80),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_line, max_size=12),
       offsets=st.dictionaries(_field, st.integers(-3, 50), max_size=3),
       sources=st.dictionaries(_field, st.text(max_size=200), max_size=3))
def test_parse_diagnostics_never_raises(lines: list[str], offsets: dict[str, int], sources: dict[str, str]) -> None:
    text = "\n".join(lines)
    diags = parse_diagnostics(text, offsets)
    assert all(isinstance(d, Diagnostic) for d in diags)
    render_diagnostics(diags, sources)
    str(sk.SlangCompileError("m", diags, sources))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_parse_diagnostics_on_arbitrary_bytes(data: bytes) -> None:
    diags = parse_diagnostics(data.decode("utf-8", "replace"))
    render_diagnostics(diags, {d.cell or "": "x\n" * 3 for d in diags})


def test_real_diagnostic_lines() -> None:
    text = ("E30019\terror\tcell[7]\t5\t14\t5\t15\ttype mismatch\n"
            "E30019\tspan\tcell[7]\t5\t14\t5\t15\texpected an expression of type 'float', got 'int'\n")
    (d,) = parse_diagnostics(text, {"cell[7]": 1})
    assert (d.severity, d.cell, d.line, d.column) == ("error", "cell[7]", 4, 14)
    assert "expected an expression" in d.message
