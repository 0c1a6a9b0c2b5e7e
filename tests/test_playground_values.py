"""Uniform values of a Playground program (slang_kernel.playground.values): MOUSE_POSITION, TIME and
FRAME_ID in the uniform's own scalar type, and a KEY input's control."""

from __future__ import annotations

import numpy as np

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram
from slang_kernel.widgets import controls_for


def test_int4_mouse_position_cpu() -> None:
    with sk.Session(backend="cpu") as s:
        s.run_cell("""
import playground;
[playground::MOUSE_POSITION] uniform int4 mousePosition;
[playground::ZEROS(4)] RWStructuredBuffer<int> mouseOut;
[shader("compute")][numthreads(1, 1, 1)][playground::CALL(1, 1, 1)]
void copyMouse(uint3 t: SV_DispatchThreadID) { for (int i = 0; i < 4; i++) mouseOut[i] = mousePosition[i]; }
""", name="int_mouse")
        p = PlaygroundProgram(s, "int_mouse")
        assert p.frame().read("mouseOut").tolist() == [0, 0, 0, 0]
        p.frame(mousePosition=(12.4, 7.6, -3.0, 0))
        assert p.read("mouseOut").tolist() == [12, 8, -3, 0]


def test_time_and_frame_id_in_every_scalar_type(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("""
import playground;
[playground::TIME] uniform uint timeU;
[playground::TIME] uniform int timeI;
[playground::TIME] uniform float timeF;
[playground::FRAME_ID] uniform uint frameU;
[playground::FRAME_ID] uniform int frameI;
[playground::FRAME_ID] uniform float frameF;
[playground::ZEROS(6)] RWStructuredBuffer<float> clocks;
[shader("compute")][numthreads(1, 1, 1)][playground::CALL(1, 1, 1)]
void readClocks(uint3 t: SV_DispatchThreadID)
{
    clocks[0] = float(timeU); clocks[1] = float(timeI); clocks[2] = timeF;
    clocks[3] = float(frameU); clocks[4] = float(frameI); clocks[5] = frameF;
}
""", name="clocks")
    p = PlaygroundProgram(cpu_session, "clocks")
    for _ in range(3):
        p.frame()
    c = p.read("clocks")
    assert c[3:].tolist() == [2, 2, 2]
    assert isinstance(p.uniforms["timeU"], int) and isinstance(p.uniforms["frameI"], int)
    assert isinstance(p.uniforms["timeF"], float)
    assert c[0] == float(p.uniforms["timeU"]) and c[0] == np.floor(c[0]) and abs(c[2] - c[0]) < 1000


def test_key_input_becomes_a_key_control(cpu_session: sk.Session) -> None:
    from slang_kernel.widgets import Key

    cpu_session.run_cell("""
import playground;
[playground::ZEROS(4)] RWStructuredBuffer<float> keyOut;
[playground::KEY("KeyA")] uniform float keyA;
[shader("compute")][numthreads(4, 1, 1)][playground::CALL(4, 1, 1)]
void keyed(uint3 t: SV_DispatchThreadID) { keyOut[t.x] = keyA; }""", name="keyed")
    prog = PlaygroundProgram(cpu_session, "keyed")
    ctl = controls_for(prog)["keyA"]
    assert isinstance(ctl, Key) and ctl.code == "KeyA"
