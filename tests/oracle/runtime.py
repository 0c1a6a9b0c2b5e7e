"""The oracle: a Slang Playground demo run the way the Playground's runtime runs it, on wgpu.

A line-by-line port (test-only, no slang_kernel code) of, in the public shader-slang/slang-playground at
461eaa9:
- `engine/slang-compilation-engine/src/playgroundCompiler.ts` (`compilePlayground`: bindings, resource
  commands, uniform controllers, uniform size, call commands, all read off Slang's reflection JSON);
- `engine/playground-render-canvas/src/RenderCanvas.vue` (`onRun`: one pipeline per call command with
  the layout minus a command's own indirect buffer; `processResourceCommands`; `execFrame`: uniforms
  written, the print buffer cleared, call commands dispatched in reflection order with CALL::ONCE
  ones on the first frame only, workgroups rounded up; `writeUniformData`);
- `engine/playground-render-canvas/src/pass_through.ts` (the canvas: `outputTexture` drawn by a
  full-screen quad whose uv (0,0) sits at the bottom-left, so the texture is shown flipped);
- `engine/playground-render-canvas/src/canvasUtils.ts` (`parsePrintfBuffer` and the printf formatting).

What the browser adds and this does not: the canvas is `width` x `height` pixels (the Playground's is
the page's size); TIME is the frame time the caller passes (the Playground's requestAnimationFrame
clock); RAND buffers take the caller's values (the Playground's Math.random()); a URL image is decoded
by Pillow (the Playground's by the browser); mouse events are the caller's.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Callable

import numpy as np
import wgpu

from .slang_wgsl import CompiledShader, compile_wgsl

__all__ = ["Mouse", "PlaygroundRuntime", "device", "format_printf"]

_device: Any = None


def device() -> Any:
    """One wgpu device for the test run (lavapipe here)."""
    global _device
    if _device is None:
        _device = wgpu.gpu.request_adapter_sync(power_preference="high-performance").request_device_sync()
    return _device


# -- playgroundCompiler.ts / compilationUtils.ts ------------------------------------------------------

_FORMATS = {"rgba32f": "rgba32float", "rgba16f": "rgba16float", "rg32f": "rg32float", "r32f": "r32float",
            "r16f": "r16float", "rgba8": "rgba8unorm", "rg8": "rg8unorm", "r8": "r8unorm", "r32ui": "r32uint",
            "r32i": "r32sint", "rgba32ui": "rgba32uint", "rgba32i": "rgba32sint", "rgba8ui": "rgba8uint"}
_ACCESS = {"readWrite": "read-write", "write": "write-only", "read": "read-only"}
_TEXEL_BYTES = {"r8unorm": 1, "r32float": 4, "r32uint": 4, "r32sint": 4, "rgba8unorm": 4, "rg32float": 8,
                "rgba16float": 8, "rgba32float": 16, "rgba32uint": 16, "rgba32sint": 16, "r16float": 2,
                "rg8unorm": 2, "rgba8uint": 4}


def _scalar_bits(scalar: str) -> int:
    return int("".join(c for c in scalar if c.isdigit()))


def _texture_format(refl_param: dict[str, Any], access: str | None) -> str:
    """getBindingDescriptor / getTextureFormat: [format] if given, else from the texel type."""
    if refl_param.get("format"):
        return _FORMATS[refl_param["format"]]
    rt = refl_param["type"]["resultType"]
    if rt["kind"] == "scalar":
        n, scalar = 1, rt["scalarType"]
    else:
        n, scalar = rt["elementCount"], rt["elementType"]["scalarType"]
    if access == "read-write" and n > 1:
        raise ValueError("There are no texture formats available with more than 1 component that are read-write")
    kind = scalar.rstrip("0123456789")
    kind = "sint" if kind == "int" else kind
    rep = f"{_scalar_bits(scalar)}{kind}"
    return ("r" if n == 1 else "rg" if n == 2 else "rgba") + rep


def _size_of(t: dict[str, Any]) -> int:
    """getSize(reflectionType)."""
    if t["kind"] == "scalar":
        return _scalar_bits(t["scalarType"]) // 8
    if t["kind"] == "vector":
        n = 4 if t["elementCount"] == 3 else t["elementCount"]
        return n * _size_of(t["elementType"])
    if t["kind"] == "struct":
        align = max(f["binding"]["size"] for f in t["fields"])
        end = max(f["binding"]["offset"] + f["binding"]["size"] for f in t["fields"])
        return math.ceil(end / align) * align
    raise ValueError(f"getSize: unsupported {t['kind']}")


def _binding(p: dict[str, Any]) -> dict[str, Any]:
    """getBindingDescriptor: the GPUBindGroupLayoutEntry of one parameter."""
    t, b = p["type"], p["binding"]
    entry: dict[str, Any] = {"binding": b["index"] if b["kind"] == "descriptorTableSlot" else 0,
                             "visibility": wgpu.ShaderStage.COMPUTE}
    if t["kind"] == "resource":
        if t["baseShape"] in ("texture2D", "texture3D"):
            dim = "3d" if t["baseShape"] == "texture3D" else "2d"
            if t.get("access") is None:
                entry["texture"] = {"view_dimension": dim}
            else:
                access = _ACCESS[t["access"]]
                entry["storage_texture"] = {"access": access, "format": _texture_format(p, access),
                                            "view_dimension": dim}
        elif t["baseShape"] == "structuredBuffer":
            entry["buffer"] = {"type": "storage" if t.get("access") == "readWrite" else "read-only-storage"}
        else:
            raise ValueError(f"Could not generate binding for {p['name']}")
    elif t["kind"] == "samplerState":
        entry["sampler"] = {}
    elif b["kind"] == "uniform":
        entry["buffer"] = {"type": "uniform"}
    return entry


@dataclass
class CallCommand:
    fn: str
    type: str                   # FIXED_SIZE, RESOURCE_BASED, INDIRECT
    size: tuple[int, ...] = ()
    resource: str = ""
    element_size: int | None = None
    offset: int = 0
    once: bool = False


@dataclass
class CompiledPlayground:
    shader: CompiledShader
    layout: dict[str, dict[str, Any]]
    resource_commands: list[tuple[str, str, list[Any], dict[str, Any]]]   # (name, type, args, param)
    uniforms: list[tuple[str, str, int, str, list[Any]]]   # (name, type, offset, scalarType, args)
    uniform_size: int
    calls: list[CallCommand]


def compile_playground(shader: CompiledShader) -> CompiledPlayground:
    refl = shader.reflection
    params = refl["parameters"]
    layout = {p["name"]: _binding(p) for p in params}
    if any(p["binding"]["kind"] == "uniform" for p in params):
        for p in params:
            if p["binding"]["kind"] == "uniform":
                layout.pop(p["name"], None)
        layout["uniformInput"] = {"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE,
                                  "buffer": {"type": "uniform"}}
    resources: list[tuple[str, str, list[Any], dict[str, Any]]] = []
    uniforms: list[tuple[str, str, int, str, list[Any]]] = []
    for p in params:
        for a in p.get("userAttribs") or []:
            if not a["name"].startswith("playground_"):
                continue
            kind, args = a["name"][len("playground_"):], list(a.get("arguments", []))
            if kind in ("ZEROS", "SAMPLER", "RAND", "BLACK", "BLACK_3D", "BLACK_SCREEN", "URL", "DATA"):
                resources.append((p["name"], kind, args, p))
            elif kind in ("SLIDER", "COLOR_PICK", "TIME", "FRAME_ID", "MOUSE_POSITION", "KEY"):
                t = p["type"]
                scalar = t.get("scalarType") or (t.get("elementType") or {}).get("scalarType", "float32")
                uniforms.append((p["name"], kind, p["binding"]["offset"], scalar, args))
    size = 0
    for p in params:
        if p["binding"]["kind"] == "uniform":
            size = max(size, p["binding"]["offset"] + p["binding"]["size"])
    calls: list[CallCommand] = []
    for ep in refl["entryPoints"]:
        cmd: CallCommand | None = None
        once = False
        for a in ep.get("userAttribs") or []:
            n, args = a["name"], a.get("arguments", [])
            if n == "playground_CALL_SIZE_OF":
                rp = next(q for q in params if q["name"] == args[0])
                es = _size_of(rp["type"]["resultType"]) if rp["type"].get("baseShape") == "structuredBuffer" else None
                cmd = CallCommand(ep["name"], "RESOURCE_BASED", resource=args[0], element_size=es)
            elif n == "playground_CALL":
                cmd = CallCommand(ep["name"], "FIXED_SIZE", size=tuple(int(x) for x in args))
            elif n == "playground_CALL_INDIRECT":
                cmd = CallCommand(ep["name"], "INDIRECT", resource=args[0], offset=int(args[1]))
            elif n == "playground_CALL_ONCE":
                once = True
        if cmd is not None:
            cmd.once = once
            calls.append(cmd)
    return CompiledPlayground(shader, layout, resources, uniforms, math.ceil(size / 16) * 16, calls)


# -- canvasUtils.ts: printf -------------------------------------------------------------------------

_PRINTF = __import__("re").compile(r"%([-+ #0]*)(\d*)(\.\d+)?([diufFeEgGxXosc])")


def _js_fixed(x: float, digits: int) -> str:
    """Number.prototype.toFixed: the exact double, ties away from zero in magnitude (larger n)."""
    q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    s = f"{q:f}"
    return s if not (q == 0 and s.startswith("-")) else s[1:]


def _js_exponential(x: float, digits: int) -> str:
    """Number.prototype.toExponential(digits): d.ddde+X (no zero padding of the exponent)."""
    if x == 0:
        return "0" + ("." + "0" * digits if digits else "") + "e+0"
    d = Decimal(x)
    e = d.copy_abs().adjusted()
    m = (d.scaleb(-e)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if abs(m) >= 10:
        e += 1
        m = (d.scaleb(-e)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{m:f}e{'+' if e >= 0 else '-'}{abs(e)}"


def _js_precision(x: float, p: int) -> str:
    """Number.prototype.toPrecision(p)."""
    if x == 0:
        return "0" + ("." + "0" * (p - 1) if p > 1 else "")
    e = Decimal(x).copy_abs().adjusted()
    r = float(Decimal(x).scaleb(-e).quantize(Decimal(1).scaleb(-(p - 1)), rounding=ROUND_HALF_UP))
    if abs(r) >= 10:
        e += 1
    if e < -6 or e >= p:
        return _js_exponential(x, p - 1)
    return _js_fixed(x, p - 1 - e)


def format_printf(fmt: str, data: list[Any]) -> str:
    """formatPrintfString(parsePrintfFormat(fmt), data), as canvasUtils.ts formats."""
    out, last, i = [], 0, 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[last:m.start()])
        last = m.end()
        flags, width, prec, conv = m.groups()
        value = data[i] if i < len(data) else None
        i += 1
        p = int(prec[1:]) if prec else 6
        if conv in "di":
            v = int(value) & 0xFFFFFFFF
            s = str(v - (1 << 32) if v >= 1 << 31 else v)
        elif conv in "uoxX":
            v = abs(int(value))
            s = str(v) if conv == "u" else format(v, "o" if conv == "o" else "x")
            s = s.upper() if conv == "X" else s
        elif conv in "fF":
            s = _js_fixed(float(value), p)
        elif conv in "eE":
            s = _js_exponential(float(value), p)
            s = s.upper() if conv == "E" else s
        elif conv in "gG":
            s = _js_precision(float(value), p)
        elif conv == "c":
            s = chr(int(value))
        else:
            s = str(value)
            s = s[:p] if prec else s
        if width:
            w = int(width)
            num = float(value) if isinstance(value, (int, float)) else math.nan
            if "+" in flags and num >= 0:
                s = "+" + s
            elif " " in flags and num >= 0:
                s = " " + s
            if len(s) < w:
                pad = ("0" if "0" in flags and "-" not in flags else " ") * (w - len(s))
                s = s + pad if "-" in flags else pad + s
        out.append(s)
    out.append(fmt[last:])
    return "".join(out)


def parse_printf_buffer(hashed: dict[int, str], words: np.ndarray) -> list[str]:
    """parsePrintfBuffer: records of (type, low, high) uint32 triples."""
    w = words.view(np.uint32).reshape(-1, 3)
    out: list[str] = []
    fmt, data = "", []   # type: ignore[var-annotated]
    for k in range(w.shape[0]):
        t, low = int(w[k, 0]), int(w[k, 1])
        if t == 1:
            fmt = hashed[low]
        elif t == 2:
            data.append(hashed.get(low))
        elif t == 3:
            data.append(low)
        elif t == 4:
            data.append(float(np.uint32(low).view(np.float32)))
        elif t == 5:
            data.append(0)
        elif t == 0xFFFFFFFF:
            out.append(format_printf(fmt, data))
            fmt, data = "", []
            if k < w.shape[0] - 1 and int(w[k + 1, 0]) != 1:
                return out
    if fmt != "":
        out.append(format_printf(fmt, data))
        out.append("Print buffer is out of boundary, some data is missing!!!")
    return out


# -- RenderCanvas.vue ---------------------------------------------------------------------------------


@dataclass
class Mouse:
    """The canvas mouse state RenderCanvas.vue keeps (offsetX / offsetY: CSS pixels from the top-left)."""
    x: float = 0.0
    y: float = 0.0
    down_x: float = 0.0
    down_y: float = 0.0
    is_down: bool = False
    clicked: bool = False


_PASS_THROUGH = Path(__file__).with_name("pass_through.wgsl").read_text()


@dataclass
class PlaygroundRuntime:
    """`onRun(compilePlayground(compile(source)))` on a `width` x `height` canvas; `frame()` is one
    `execFrame`. rand: given the RAND buffers' (name, count) in declaration order, their float32
    values (the Playground draws them with Math.random()); base_dir: what URL / DATA paths are relative to (the page's address)."""

    source: str
    width: int
    height: int
    base_dir: Path
    rand: Callable[[list[tuple[str, int]]], dict[str, np.ndarray]] | None = None
    image_loader: Callable[[bytes], np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.dev = device()
        self.shader = compile_wgsl(self.source)
        names = [p["name"] for p in self.shader.reflection["parameters"]]
        self.runnable = "outputTexture" in names or "g_printedBuffer" in names
        self.printed = ""
        self.frame_id = 0
        self.first = True
        self.mouse = Mouse()
        self.slider: dict[str, Any] = {}
        if not self.runnable:
            return
        self.pg = compile_playground(self.shader)
        self._setup()

    # onRun's setupFn
    def _setup(self) -> None:
        dev, pg = self.dev, self.pg
        module = dev.create_shader_module(code=pg.shader.code)
        exclude: dict[str, list[str]] = {}
        indirect = set()
        for c in pg.calls:
            if c.type == "INDIRECT":
                indirect.add(c.resource)
                exclude.setdefault(c.resource, []).append(c.fn)
        self.res: dict[str, Any] = {}
        self._resources(indirect)
        self.pipelines = []
        for c in pg.calls:
            bindings = {n: e for n, e in pg.layout.items() if c.fn not in exclude.get(n, [])}
            bgl = dev.create_bind_group_layout(entries=list(bindings.values()))
            pipe = dev.create_compute_pipeline(layout=dev.create_pipeline_layout(bind_group_layouts=[bgl]),
                                               compute={"module": module, "entry_point": c.fn})
            entries = []
            for n, e in bindings.items():
                r = self.res[n]
                if "buffer" in e:
                    entries.append({"binding": e["binding"], "resource": {"buffer": r}})
                elif "sampler" in e:
                    entries.append({"binding": e["binding"], "resource": r})
                else:
                    dim = (e.get("storage_texture") or e.get("texture") or {}).get("view_dimension", "2d")
                    entries.append({"binding": e["binding"], "resource": r.create_view(dimension=dim)})
            bg = dev.create_bind_group(layout=bgl, entries=entries)
            self.pipelines.append((c, pipe, bg, self.shader.thread_group_sizes[c.fn]))
        self.values: dict[str, Any] = {n: a[0] for n, k, _, _, a in pg.uniforms if k == "SLIDER"}
        self.values.update({n: list(a) for n, k, _, _, a in pg.uniforms if k == "COLOR_PICK"})

    # processResourceCommands
    def _resources(self, indirect: set[str]) -> None:
        dev, pg, BU, TU = self.dev, self.pg, wgpu.BufferUsage, wgpu.TextureUsage
        wanted = [(n, int(a[0])) for n, k, a, _ in pg.resource_commands if k == "RAND"]
        rand = self.rand(wanted) if self.rand is not None else {
            n: np.random.default_rng().random(c).astype(np.float32) for n, c in wanted}
        self.res["uniformInput"] = dev.create_buffer(size=max(pg.uniform_size, 16), usage=BU.UNIFORM | BU.COPY_DST)
        for name, kind, args, p in pg.resource_commands:
            entry = pg.layout[name]
            extra = BU.INDIRECT if name in indirect else 0
            if kind in ("ZEROS", "RAND", "DATA"):
                if kind == "ZEROS":
                    data = np.zeros(int(args[0]) * _size_of(p["type"]["resultType"]), np.uint8)
                elif kind == "RAND":
                    data = np.asarray(rand[name], np.float32).view(np.uint8)
                    assert data.size == int(args[0]) * 4, f"RAND({args[0]}) of {name}: {data.size // 4} given"
                else:
                    raw = (self.base_dir / args[0]).read_bytes()
                    es = _size_of(p["type"]["resultType"])
                    data = np.frombuffer(raw[:len(raw) // es * es], np.uint8)
                buf = dev.create_buffer(size=data.size, usage=BU.STORAGE | BU.COPY_DST | BU.COPY_SRC | extra)
                dev.queue.write_buffer(buf, 0, data)
                self.res[name] = buf
            elif kind == "SAMPLER":
                self.res[name] = dev.create_sampler(mag_filter="linear", min_filter="linear", mipmap_filter="linear",
                                                    address_mode_u="repeat", address_mode_v="repeat",
                                                    address_mode_w="repeat")
            elif kind in ("BLACK", "BLACK_SCREEN", "BLACK_3D"):
                fmt = entry["storage_texture"]["format"]
                if kind == "BLACK":
                    size = (int(args[0]), int(args[1]), 1)
                elif kind == "BLACK_3D":
                    size = (int(args[0]), int(args[1]), int(args[2]))
                else:
                    size = (int(args[0] * self.width), int(args[1] * self.height), 1)
                usage = TU.TEXTURE_BINDING | TU.COPY_DST | TU.COPY_SRC | TU.STORAGE_BINDING
                tex = dev.create_texture(size=size, format=fmt, usage=usage,
                                         dimension="3d" if kind == "BLACK_3D" else "2d")
                bpt = _TEXEL_BYTES[fmt]
                dev.queue.write_texture({"texture": tex}, np.zeros(size[0] * size[1] * size[2] * bpt, np.uint8),
                                        {"bytes_per_row": size[0] * bpt, "rows_per_image": size[1]}, size)
                self.res[name] = tex
            elif kind == "URL":
                fmt = _texture_format(p, _ACCESS[p["type"].get("access") or "read"])
                rgba = self._image((self.base_dir / args[0]).read_bytes())
                h, w = rgba.shape[:2]
                tex = dev.create_texture(size=(w, h, 1), format=fmt,
                                         usage=TU.TEXTURE_BINDING | TU.COPY_DST | TU.COPY_SRC)
                data = rgba if fmt == "rgba8unorm" else (rgba.astype(np.float32) / 255.0)
                assert fmt in ("rgba8unorm", "rgba32float"), fmt
                dev.queue.write_texture({"texture": tex}, np.ascontiguousarray(data),
                                        {"bytes_per_row": w * _TEXEL_BYTES[fmt], "rows_per_image": h}, (w, h, 1))
                self.res[name] = tex
        if "g_printedBuffer" in self.res:
            self.res["printfBufferRead"] = self.res["g_printedBuffer"]

    def _image(self, raw: bytes) -> np.ndarray:
        if self.image_loader is not None:
            return self.image_loader(raw)
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(raw)).convert("RGBA"), np.uint8)

    # writeUniformData
    def _uniforms(self, time_ms: float) -> None:
        buf = bytearray(max(self.pg.uniform_size, 16))
        m = self.mouse
        for name, kind, off, scalar, _args in self.pg.uniforms:
            if kind == "SLIDER":
                _write(buf, "float32", off, self.values[name])
            elif kind == "COLOR_PICK":
                for i, v in enumerate(self.values[name]):
                    _write(buf, "float32", off + 4 * i, v)
            elif kind == "TIME":
                _write(buf, scalar, off, time_ms * 0.001)
            elif kind == "FRAME_ID":
                _write(buf, scalar, off, self.frame_id)
            elif kind == "MOUSE_POSITION":
                data = [m.x, m.y, m.down_x * (-1 if m.is_down else 1), m.down_y * (-1 if m.clicked else 1)]
                for i, v in enumerate(data):
                    _write(buf, scalar, off + i * _scalar_bits(scalar) // 8, v)
            elif kind == "KEY":
                _write(buf, scalar, off, 0)
        self.dev.queue.write_buffer(self.res["uniformInput"], 0, bytes(buf))

    def frame(self, time_ms: float = 0.0) -> None:
        """execFrame(timeMS, compiledCode, firstFrame)."""
        if not self.runnable:
            return
        dev = self.dev
        self._uniforms(time_ms)
        enc = dev.create_command_encoder()
        printed = self.res.get("g_printedBuffer")
        if printed is not None:
            enc.clear_buffer(printed)
        for c, pipe, bg, block in self.pipelines:
            if c.once and not self.first:
                continue
            cp = enc.begin_compute_pass()
            cp.set_bind_group(0, bg)
            cp.set_pipeline(pipe)
            if c.type == "INDIRECT":
                cp.dispatch_workgroups_indirect(self.res[c.resource], c.offset)
                cp.end()
                continue
            if c.type == "RESOURCE_BASED":
                r = self.res[c.resource]
                if isinstance(r, wgpu.GPUBuffer):
                    size = [r.size // (c.element_size or 4), 1, 1]
                else:
                    size = [r.width, r.height, r.depth_or_array_layers]
            else:
                size = [1, 1, 1]
                for i, s in enumerate(c.size):
                    size[i] = s
            groups = [int(math.floor((s + b - 1) / b)) for s, b in zip(size, block)]
            cp.dispatch_workgroups(*groups)
            cp.end()
        dev.queue.submit([enc.finish()])
        if printed is not None:
            words = np.frombuffer(dev.queue.read_buffer(printed), np.uint32)
            text = parse_printf_buffer(self.shader.hashed_strings, words)
            if text:
                self.printed = "".join(text)
        self.first = False
        self.frame_id += 1

    # -- what the page shows ---------------------------------------------------------------------------

    def texture(self, name: str) -> np.ndarray:
        """A texture's texels, row 0 first, as stored (rgba8unorm: uint8)."""
        tex = self.res[name]
        w, h, d = tex.width, tex.height, tex.depth_or_array_layers
        fmt = str(tex.format)
        bpt = _TEXEL_BYTES[fmt]
        bpr = (w * bpt + 255) // 256 * 256
        raw = np.frombuffer(self.dev.queue.read_texture({"texture": tex}, {"bytes_per_row": bpr,
                                                                          "rows_per_image": h}, (w, h, d)), np.uint8)
        rows = raw.reshape(d, h, bpr)[:, :, :w * bpt]
        dt = {"unorm": np.uint8, "float": np.float32, "uint": np.uint32, "sint": np.int32}[
            next(k for k in ("unorm", "float", "uint", "sint") if k in fmt)]
        out = np.ascontiguousarray(rows).view(dt).reshape(d, h, w, -1)
        return out[0] if d == 1 else out

    def canvas(self) -> np.ndarray:
        """The canvas after the frame: pass_through.ts's quad drawing outputTexture, (H, W, 4) uint8."""
        dev, TU = self.dev, wgpu.TextureUsage
        src = self.res["outputTexture"]
        target = dev.create_texture(size=(self.width, self.height, 1), format="rgba8unorm",
                                    usage=TU.RENDER_ATTACHMENT | TU.COPY_SRC)
        module = dev.create_shader_module(code=_PASS_THROUGH)
        bgl = dev.create_bind_group_layout(entries=[
            {"binding": 0, "visibility": wgpu.ShaderStage.FRAGMENT, "sampler": {}},
            {"binding": 1, "visibility": wgpu.ShaderStage.FRAGMENT, "texture": {"sample_type": "float"}}])
        pipe = dev.create_render_pipeline(
            layout=dev.create_pipeline_layout(bind_group_layouts=[bgl]),
            vertex={"module": module, "entry_point": "vs"},
            fragment={"module": module, "entry_point": "fs", "targets": [{"format": "rgba8unorm"}]})
        bg = dev.create_bind_group(layout=bgl, entries=[
            {"binding": 0, "resource": dev.create_sampler()},
            {"binding": 1, "resource": src.create_view()}])
        enc = dev.create_command_encoder()
        rp = enc.begin_render_pass(color_attachments=[{"view": target.create_view(), "clear_value": (0.3, 0.3, 0.3, 1),
                                                       "load_op": "clear", "store_op": "store"}])
        rp.set_bind_group(0, bg)
        rp.set_pipeline(pipe)
        rp.draw(6)
        rp.end()
        dev.queue.submit([enc.finish()])
        bpr = (self.width * 4 + 255) // 256 * 256
        raw = np.frombuffer(dev.queue.read_texture({"texture": target}, {"bytes_per_row": bpr, "rows_per_image":
                                                                         self.height}, (self.width, self.height, 1)),
                            np.uint8)
        return np.ascontiguousarray(raw.reshape(self.height, bpr)[:, :self.width * 4].reshape(self.height, self.width, 4))


def _write(buf: bytearray, scalar: str, off: int, value: float) -> None:
    """writeScalar: DataView setters (integers: ToInt32 / ToUint32, i.e. truncated and wrapped)."""
    if scalar.startswith("float"):
        dt = np.float32 if scalar == "float32" else np.float64
        raw = np.asarray(value, dt).tobytes()
        buf[off:off + len(raw)] = raw
        return
    v = int(math.trunc(value)) if math.isfinite(value) else 0
    bits = _scalar_bits(scalar)
    v &= (1 << bits) - 1
    buf[off:off + bits // 8] = v.to_bytes(bits // 8, "little")
