"""Specialization from Python on every backend (issue 15 item 6): generic entry points
(`specialize={"T": ..., "N": ...}`), link-time `extern` declarations, type conformances for dynamic
dispatch, one compile per specialization, cell edits, and the errors for bad values."""

from __future__ import annotations

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.engine.specialize import SpecializationError

TYPES = """
interface ISpScale { float apply(float x); };
struct SpDouble : ISpScale { float k; float apply(float x) { return 2.0 * x + k; } };
struct SpNegate : ISpScale { float k; float apply(float x) { return -x + k; } };
struct SpPlain { float k; };
"""


@pytest.fixture(scope="module")
def spec_session(session: sk.Session) -> sk.Session:
    session.run_cell(TYPES, name="sp_types")
    session.run_cell("""
[shader("compute")] [numthreads(N, 1, 1)]
void sp_generic<T : ISpScale, let N : int>(uint3 t : SV_DispatchThreadID,
                                           uniform StructuredBuffer<T> items, uniform RWStructuredBuffer<float> res)
{
    res[t.x] = items[t.x].apply(float(t.x)) * N;
}""", name="sp_kernel")
    return session


def test_generic_entry_point_two_specializations(spec_session: sk.Session) -> None:
    s = spec_session
    items = np.zeros(8, s.dtype("SpDouble"))
    items["k"] = np.arange(8) * 0.5
    k2 = s.kernel("sp_generic", specialize={"T": "SpDouble", "N": 4})
    assert "sp_generic<T=SpDouble, N=4>" in repr(k2) and k2.numthreads == (4, 1, 1)
    assert "StructuredBuffer<SpDouble> items" in k2.signature
    res = np.zeros(8, np.float32)
    k2(threads=8, items=items, res=res)
    np.testing.assert_allclose(res, (2 * np.arange(8) + items["k"]) * 4)
    kn = s.kernel("sp_generic", specialize={"T": "SpNegate", "N": 2})
    res2 = np.zeros(8, np.float32)
    kn(threads=8, items=items.view(s.dtype("SpNegate")), res=res2)
    np.testing.assert_allclose(res2, (-np.arange(8) + items["k"]) * 2)
    assert kn.numthreads == (2, 1, 1) and kn.compiled().key != k2.compiled().key
    # the same specialization again is the same compiled kernel (compiled once); both stay usable
    again = s.kernel("sp_generic", specialize={"N": 4, "T": "SpDouble"})
    assert again.compiled() is k2.compiled()
    assert s.kernel("sp_generic").specialize(T="SpDouble", N=4).compiled() is k2.compiled()  # a bound kernel's way
    k2(threads=8, items=items, res=res)
    np.testing.assert_allclose(res, (2 * np.arange(8) + items["k"]) * 4)
    assert "SpDouble" in k2.code("hlsl") and "SpNegate" not in k2.code("hlsl")


def test_link_time_extern_type_and_constant(spec_session: sk.Session) -> None:
    s = spec_session
    s.run_cell("""
interface ISpOffset { static float offset(); };
struct SpOne : ISpOffset { static float offset() { return 1.0; } };
struct SpHalf : ISpOffset { static float offset() { return 0.5; } };
extern struct SpLinked : ISpOffset;
extern static const int SP_COUNT;
[shader("compute")] [numthreads(4, 1, 1)]
void sp_linked(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res)
{
    res[t.x] = float(t.x) * SpLinked::offset() + SP_COUNT;
}""", name="sp_extern")
    res = np.zeros(4, np.float32)
    with pytest.raises(SpecializationError, match=r"extern declarations that nothing defines: `extern struct "
                                                  r"SpLinked : ISpOffset` \(sp_extern\), `extern static const int SP_COUNT`"):
        s.kernel("sp_linked")(threads=4, res=res)
    k = s.kernel("sp_linked", specialize={"SpLinked": "SpOne", "SP_COUNT": 10})
    assert "sp_linked<SpLinked=SpOne, SP_COUNT=10>" in repr(k)
    k(threads=4, res=res)
    np.testing.assert_allclose(res, np.arange(4) + 10)
    s.kernel("sp_linked", specialize={"SpLinked": "SpHalf", "SP_COUNT": -1})(threads=4, res=res)
    np.testing.assert_allclose(res, np.arange(4) * 0.5 - 1)
    with pytest.raises(SpecializationError, match=r"'SpDouble' does not conform to 'ISpOffset'|does not conform"):
        s.kernel("sp_linked", specialize={"SpLinked": "SpDouble", "SP_COUNT": 1})(threads=4, res=res)
    with pytest.raises(SpecializationError, match=r"SP_COUNT.*integer \(int\); got float 2\.5"):
        s.kernel("sp_linked", specialize={"SpLinked": "SpOne", "SP_COUNT": 2.5})


def test_type_conformances_dynamic_dispatch(spec_session: sk.Session) -> None:
    s = spec_session
    s.run_cell("""
[shader("compute")] [numthreads(1, 1, 1)]
void sp_dynamic(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res, uniform int which)
{
    ISpScale q = createDynamicObject<ISpScale, float>(which, 0.5);
    res[0] = q.apply(3.0);
}""", name="sp_dyn")
    conformances = [("ISpScale", "SpDouble", 7), ("ISpScale", "SpNegate", 3)]
    res = np.zeros(1, np.float32)
    if s.backend.target not in ("cpp", "cuda") and "type_conformances" not in s.backend.capabilities:
        with pytest.raises(SpecializationError, match="type_conformances need a backend"):
            s.kernel("sp_dynamic", type_conformances=conformances)(threads=1, res=res, which=7)
        s.kernel("sp_generic", specialize={"T": "SpDouble", "N": 1})  # the session is still usable
        return
    k = s.kernel("sp_dynamic", type_conformances=conformances)
    assert "conformances SpDouble:ISpScale=7, SpNegate:ISpScale=3" in repr(k)
    k(threads=1, res=res, which=7)
    np.testing.assert_allclose(res, [6.5])
    k(threads=1, res=res, which=3)
    np.testing.assert_allclose(res, [-2.5])
    with pytest.raises(SpecializationError, match=r"no type 'SpMissing' in this session; defined: .*SpDouble"):
        s.kernel("sp_dynamic", type_conformances=[("ISpScale", "SpMissing", 1)])(threads=1, res=res, which=1)
    with pytest.raises(SpecializationError, match="same id twice"):
        s.kernel("sp_dynamic", type_conformances=[("ISpScale", "SpDouble", 1), ("ISpScale", "SpNegate", 1)])


@pytest.mark.parametrize("bad, message", [
    ({"T": "SpMissing", "N": 1}, r"no type 'SpMissing' in this session; defined: .*ISpScale.*SpDouble"),
    ({"T": "SpPlain", "N": 1}, r"'SpPlain' does not conform to 'ISpScale', which sp_generic requires"),
    ({"T": "SpDouble"}, r"sp_generic is generic .* needs a value for `let N : int`"),
    ({"T": "SpDouble", "N": "four"}, r"`let N : int` is a value of type int, not a type.*got the string 'four'"),
    ({"T": 3, "N": 1}, r"`T : ISpScale` is a type parameter: give a Slang type name as a string"),
    ({"T": "SpDouble", "N": 1, "M": 2}, r"no generic parameter, interface-typed parameter or extern declaration named 'M'; it has: `T : ISpScale`"),
])
def test_bad_specializations_say_what_and_leave_the_session_usable(
        spec_session: sk.Session, bad: dict[str, object], message: str) -> None:
    s = spec_session
    res = np.zeros(8, np.float32)
    items = np.zeros(8, s.dtype("SpDouble"))
    with pytest.raises(SpecializationError, match=message):
        s.kernel("sp_generic", specialize=bad)(threads=8, items=items, res=res)
    s.kernel("sp_generic", specialize={"T": "SpDouble", "N": 1})(threads=8, items=items, res=res)
    np.testing.assert_allclose(res, 2 * np.arange(8))


def test_unspecialized_generic_kernel_says_what_it_needs(spec_session: sk.Session) -> None:
    assert "sp_generic is generic (`T : ISpScale`, `let N : int`)" in repr(spec_session.kernel("sp_generic"))
    with pytest.raises(SpecializationError, match=r"needs a value for `T : ISpScale`, `let N : int`: pass "
                                                  r"specialize=\{'T': 'MyType', 'N': 4\}"):
        spec_session.kernel("sp_generic")(threads=8, items=np.zeros(8, np.float32), res=np.zeros(8, np.float32))


def test_cell_edits_invalidate_specializations(spec_session: sk.Session) -> None:
    s = spec_session
    s.run_cell("""
interface ISpEdit { float value(); };
struct SpEditA : ISpEdit { float value() { return 1.0; } };
""", name="sp_edit_types")
    s.run_cell("""
[shader("compute")] [numthreads(1, 1, 1)]
void sp_edit<T : ISpEdit>(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res)
{ T v; res[0] = v.value(); }""", name="sp_edit_kernel")
    k = s.kernel("sp_edit", specialize={"T": "SpEditA"})
    res = np.zeros(1, np.float32)
    k(threads=1, res=res)
    assert res[0] == 1.0
    before = k.compiled()
    s.run_cell("""
interface ISpEdit { float value(); };
struct SpEditA : ISpEdit { float value() { return 5.0; } };
""", name="sp_edit_types")
    k(threads=1, res=res)  # the same kernel object follows the new revision of the type's cell
    assert res[0] == 5.0 and k.compiled() is not before and not s.store.is_current(before)
    s.run_cell("""
[shader("compute")] [numthreads(1, 1, 1)]
void sp_edit(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res) { res[0] = 9.0; }""",
               name="sp_edit_kernel")
    with pytest.raises(SpecializationError, match=r"sp_edit in sp_edit_kernel changed since it was specialized"):
        k(threads=1, res=res)
    s.kernel("sp_edit")(threads=1, res=res)
    assert res[0] == 9.0


def test_interface_typed_parameter_takes_a_conforming_type(spec_session: sk.Session) -> None:
    s = spec_session
    s.run_cell("""
[shader("compute")] [numthreads(4, 1, 1)]
void sp_iface(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res, uniform ISpScale scale)
{ res[t.x] = scale.apply(float(t.x)); }""", name="sp_iface_kernel")
    res = np.zeros(4, np.float32)
    k = s.kernel("sp_iface", specialize={"scale": "SpDouble"})
    assert "SpDouble scale" in k.signature
    k(threads=4, res=res, scale={"k": 0.25})
    np.testing.assert_allclose(res, 2 * np.arange(4) + 0.25)
    s.kernel("sp_iface", specialize={"scale": "SpNegate"})(threads=4, res=res, scale={"k": 1.0})
    np.testing.assert_allclose(res, 1 - np.arange(4))
    with pytest.raises(SpecializationError, match=r"parameter `ISpScale scale` is a type parameter"):
        s.kernel("sp_iface", specialize={"scale": 2})
    with pytest.raises(SpecializationError, match=r"(?i)conform|no type"):
        s.kernel("sp_iface", specialize={"scale": "SpPlain"})(threads=4, res=res, scale={"k": 1.0})


def test_a_type_from_a_later_cell(spec_session: sk.Session) -> None:
    """The notebook order: the generic kernel first, an implementation in a later cell."""
    s = spec_session
    s.run_cell("struct SpLater : ISpScale { float k; float apply(float x) { return x * x + k; } };", name="sp_later")
    res = np.zeros(8, np.float32)
    items = np.zeros(8, s.dtype("SpLater"))
    items["k"] = 1
    s.kernel("sp_generic", specialize={"T": "SpLater", "N": 2})(threads=8, items=items, res=res)
    np.testing.assert_allclose(res, (np.arange(8) ** 2 + 1) * 2)


def test_generic_value_defaults(spec_session: sk.Session) -> None:
    s = spec_session
    s.run_cell("""
[shader("compute")] [numthreads(4, 1, 1)]
void sp_defaults<let A : int = 7, let B : uint = 5>(uint3 t : SV_DispatchThreadID, uniform RWStructuredBuffer<float> res)
{ res[t.x] = A * B + t.x; }""", name="sp_defaults_kernel")
    res = np.zeros(4, np.float32)
    s.kernel("sp_defaults")(threads=4, res=res)  # every generic parameter has a default: runs as written
    np.testing.assert_allclose(res, 35 + np.arange(4))
    s.kernel("sp_defaults", specialize={"A": 2})(threads=4, res=res)
    np.testing.assert_allclose(res, 10 + np.arange(4))
    with pytest.raises(SpecializationError, match=r"`let B : uint`.*unsigned \(uint\); got -1"):
        s.kernel("sp_defaults", specialize={"B": -1})
