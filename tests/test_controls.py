"""The live views' controls: the values they accept from the browser (and the warnings for the rest),
their specs. Fast; no browser."""

from __future__ import annotations

import logging

import pytest

import slang_kernel.widgets as W


def test_control_validation(caplog: pytest.LogCaptureFixture) -> None:
    controls = {"speed": W.Slider(0, 10, 1), "tint": W.Color((1, 0, 0)), "time": W.Time(),
                "frame": W.Frame(), "mouse": W.Mouse()}
    ok = W.validate_values(controls, {"speed": 2.5, "tint": [0, 0.5, 1], "time": 16.7, "frame": 3,
                                      "mouse": [1, 2, 3, -4]})
    assert ok == {"speed": 2.5, "tint": (0.0, 0.5, 1.0), "time": 16.7, "frame": 3,
                  "mouse": (1.0, 2.0, 3.0, -4.0)}
    bad = {"speed": 11, "tint": [0, 2, 0], "time": -1, "frame": 1.5, "mouse": [1, 2],
           "evil": "__import__('os')"}
    with caplog.at_level(logging.WARNING, logger="slang_kernel.widgets"):
        assert W.validate_values(controls, bad) == {}
        assert W.validate_values(controls, {"speed": True}) == {}
        assert W.validate_values(controls, {"speed": float("nan")}) == {}
        assert W.validate_values(controls, {"speed": "3"}) == {}
        assert W.validate_values(controls, ["speed", 3]) == {}
    assert "undeclared control 'evil'" in caplog.text and "outside [0, 10]" in caplog.text
    with pytest.raises(ValueError):
        W.Slider(1, 0)
    with pytest.raises(ValueError):
        W.Color((2, 0, 0))
    assert W.Slider(0, 10, 1).spec("s") == {"name": "s", "kind": "slider", "min": 0, "max": 10,
                                            "step": 0.1, "value": 1.0}


def test_key_control_takes_only_0_or_1() -> None:
    key = W.Key("Space")
    assert key.spec("jump")["code"] == "Space" and key.default == 0.0
    assert W.validate_values({"jump": key}, {"jump": 1}) == {"jump": 1.0}
    assert W.validate_values({"jump": key}, {"jump": 0.5, "other": 1}) == {}
