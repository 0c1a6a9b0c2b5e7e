"""Declarative live controls for :class:`LiveImage` and their validation.

Every value that arrives from the browser goes through :meth:`Control.validate`; a value that is
not for a declared control, of the wrong type or out of range is dropped and logged, never passed
to the render callback.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ._wire import ControlSpec

__all__ = ["Control", "Slider", "Color", "Time", "Frame", "Mouse", "Key", "InvalidControlValue", "validate_values"]

log = logging.getLogger("slang_kernel.widgets")


class InvalidControlValue(ValueError):
    """A value from the browser that a control refuses."""


def _real(v: object, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidControlValue(f"{what}: expected a number, got {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f):
        raise InvalidControlValue(f"{what}: not finite")
    return f


def _reals(v: object, n: int, what: str) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise InvalidControlValue(f"{what}: expected {n} numbers")
    return tuple(_real(x, what) for x in v)


class Control:
    """Base class: a named value with a default, a browser spec and a validator."""

    kind: str = ""
    spec_attrs: tuple[str, ...] = ()   # the control's own settings the browser also needs (Time: playing)

    @property
    def default(self) -> Any:
        raise NotImplementedError

    def validate(self, value: object) -> Any:
        """Return the cleaned value or raise :class:`InvalidControlValue`."""
        raise NotImplementedError

    def spec(self, name: str) -> ControlSpec:
        spec: ControlSpec = {"name": name, "kind": self.kind, "value": self.default}  # type: ignore[typeddict-item]
        spec.update({a: getattr(self, a) for a in self.spec_attrs})  # type: ignore[typeddict-item]
        return spec


@dataclass
class Slider(Control):
    """Float slider: ``Slider(min, max, value=min, step=(max-min)/100)``."""

    min: float = 0.0
    max: float = 1.0
    value: float | None = None
    step: float | None = None
    kind = "slider"

    def __post_init__(self) -> None:
        if not self.min < self.max:
            raise ValueError("Slider needs min < max")
        self.value = self.min if self.value is None else float(self.value)
        if not self.min <= self.value <= self.max:
            raise ValueError(f"Slider value {self.value} outside [{self.min}, {self.max}]")
        self.step = self.step or (self.max - self.min) / 100.0

    @property
    def default(self) -> float:
        return float(self.value)  # type: ignore[arg-type]

    def validate(self, value: object) -> float:
        f = _real(value, "slider")
        if not self.min <= f <= self.max:
            raise InvalidControlValue(f"slider: {f} outside [{self.min}, {self.max}]")
        return f

    def spec(self, name: str) -> ControlSpec:
        return {"name": name, "kind": "slider", "min": self.min, "max": self.max,
                "step": float(self.step), "value": self.default}  # type: ignore[arg-type]


@dataclass
class Color(Control):
    """Colour picker for a float3 in [0, 1]^3."""

    value: tuple[float, float, float] = (1.0, 1.0, 1.0)
    kind = "color"

    def __post_init__(self) -> None:
        self.value = self.validate(tuple(float(x) for x in self.value))

    @property
    def default(self) -> tuple[float, float, float]:
        return self.value

    def validate(self, value: object) -> tuple[float, float, float]:
        rgb = _reals(value, 3, "color")
        if not all(0.0 <= c <= 1.0 for c in rgb):
            raise InvalidControlValue("color: components must be in [0, 1]")
        return rgb  # type: ignore[return-value]


class _Count(Control):
    """Time and Frame: a count the browser advances from `value`, which is checked as a value from the
    browser is (and made a float or an int) when the control is made, and is its default."""

    value: float

    def __post_init__(self) -> None:
        self.value = self.validate(self.value)

    @property
    def default(self) -> float:
        return self.value


@dataclass
class Time(_Count):
    """Milliseconds since play started (paused: frozen). The browser drives it with play/pause.

    value: where it starts (a new view of a running program continues its clock)."""

    playing: bool = False
    value: float = 0.0
    kind = "time"
    spec_attrs = ("playing",)

    def validate(self, value: object) -> float:
        f = _real(value, "time")
        if f < 0:
            raise InvalidControlValue("time: negative")
        return f


@dataclass
class Frame(_Count):
    """Frame counter, advanced by the browser's frame loop; value: where it starts (default 0)."""

    value: int = 0
    kind = "frame"

    def validate(self, value: object) -> int:
        f = _real(value, "frame")
        if f < 0 or f != int(f):
            raise InvalidControlValue("frame: must be a non-negative integer")
        return int(f)


@dataclass
class Mouse(Control):
    """Mouse in image pixels as float4 (playground/Shadertoy convention).

    As the Playground's RenderCanvas.vue writes it: xy = position while the button is down (else
    where it was last released); abs(zw) = where the button last went down; z < 0 while the button is
    down, w < 0 once it was pressed since the run started (docs/playground.md).
    """

    kind = "mouse"
    _limit: float = field(default=1e7, repr=False)

    @property
    def default(self) -> tuple[float, float, float, float]:
        return (0.0, 0.0, 0.0, 0.0)

    def validate(self, value: object) -> tuple[float, float, float, float]:
        v = _reals(value, 4, "mouse")
        if any(abs(c) > self._limit for c in v):
            raise InvalidControlValue("mouse: coordinate out of range")
        return v  # type: ignore[return-value]


@dataclass
class Key(Control):
    """1.0 while a key (KeyboardEvent.code, e.g. "KeyA", "Space") is held with the image focused,
    else 0.0: the Playground's KEY input. Click the image to give it the keyboard."""

    code: str = "KeyA"
    kind = "key"
    spec_attrs = ("code",)

    @property
    def default(self) -> float:
        return 0.0

    def validate(self, value: object) -> float:
        f = _real(value, "key")
        if f not in (0.0, 1.0):
            raise InvalidControlValue("key: must be 0 or 1")
        return f


def validate_values(controls: Mapping[str, Control], incoming: object) -> dict[str, Any]:
    """Clean ``incoming`` (a dict from the browser) against ``controls``; log and drop the rest."""
    if not isinstance(incoming, dict):
        log.warning("live controls: ignored non-dict values %r", type(incoming).__name__)
        return {}
    clean: dict[str, Any] = {}
    for name, value in incoming.items():
        ctrl = controls.get(name) if isinstance(name, str) else None
        if ctrl is None:
            log.warning("live controls: ignored undeclared control %r", name)
            continue
        try:
            clean[name] = ctrl.validate(value)
        except InvalidControlValue as exc:
            log.warning("live controls: ignored value for %r: %s", name, exc)
    return clean
