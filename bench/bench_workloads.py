"""Two training workloads of the field, ours against slangpy's own code on the same GPU, in one run.

    python3 bench/bench_workloads.py [--devices cuda,vulkan] [--workloads splat,neural] [--iterations 300]
    python3 bench/bench_workloads.py --quick --devices vulkan      # lavapipe-sized, for debugging here

1. splat: slangpy-samples' examples/simplified-splatting (200 blobs x 9 parameters, per-pixel L2 loss
   through `bwd_diff`, the sample's Adam, 256x256 target). Ours: notebooks/10_gaussian_fit.ipynb's
   Slang cells, run by a `Step` (slang_kernel.steps). Peer: the sample's main.py loop (perPixelLoss.bwds
   then adamUpdate, one slangpy call each per iteration, its tev display left out) on
   bench/peers/simplediffsplatting2d_0431.slang.
2. neural: slangpy-samples' experiments/neuralnetwork model (frequency encoding of 6 octaves, three
   64-wide linear layers with LeakyReLU, a linear layer to RGB, exp; L2 loss; Adam lr 0.0005;
   256x256 samples per batch, a 512x512 texture). Ours: notebooks/11_neural_texture.ipynb's cells.
   Peer: the same model, batch and optimiser for slangpy's functional API
   (bench/peers/neural_texture_0431.slang), 10 batches per command encoder as the experiment's main.py.
   The experiment's own code does not run on slangpy 0.43.1: its library (neuralnetworks/) is built
   on GradOutTensor, removed with slangpy 0.41's unified tensors, and it opens a window (App).

Both sides: the same seeds, initial parameters, target (matplotlib's grace_hopper.jpg, center
square; the sample's jeep.jpg is a Git LFS object not in the repository snapshot) and iteration
count; iterations/s over the timed iterations after a warm-up, the device waited for at the end;
the final loss is computed the same way for both from the rendered result. Ratio = ours / slangpy.
Two rows of ours per workload and device: "wave-sum", the notebooks' cells as they are (each
parameter's gradient summed over a wave, one atomic per wave), and "per-pixel", the same cells with
the samples' reduction written in (one atomic add per pixel or sample and parameter, as slangpy's
DiffTensor gradients): per-pixel against slangpy is engine against engine, wave-sum against
per-pixel is the algorithm.

The port of the splatting sample to slangpy 0.43.1 (the shader's math is unchanged):
- `GradInOutTensor<float, 1>` -> `DiffTensor<float, 1>` (read-only primal, atomic gradient output);
  `blobsBuffer[idx]` -> `blobsBuffer[uint1(idx)]`; `blobs.blobsBuffer.primal.shape[0]` -> `.shape[0]`.
- `GradInOutTensor<float4, 2> output` -> `WDiffTensor<float4, 2>`; `output.set({x, y}, v)` ->
  `output.store(idx, v)` with `uint idx[2] = {x, y}` (the same dimension order).
- `RWNDBuffer<uint, 1>` (clearDerivs, unused by main.py) -> `RWTensor<uint, 1>`.
- `smoothstep` -> `smoothstepD`, the same polynomial written out: Slang 2026.12's smoothstep has no
  backward derivative, and with it every gradient is 0 (the sample learns nothing; checked here).
- main.py: `spy.Tensor.from_numpy(...).with_grads()` and `Tensor.empty(...).with_grads()` as before;
  the random initial blobs come from a seeded generator (np.random.default_rng(0)).
The splat peer runs twice: as ported, and with `[PreferRecompute]` on `Gaussian2D.load` and `eval`
(a text rewrite at load, the math unchanged): the attribute notebooks/10 carries, so that the engines
also compare on the same shader; without it NVIDIA's Vulkan driver refuses the backward pipeline
(-13), as it refused ours.
The neural peer restates the experiment's components (see the .slang file's header); one more change
there: slangpy 0.43.1 lists a vector index's dimensions last first, so `weights[row, col]` is written
`weights[uint2(col, row)]`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import rate  # noqa: E402

# The notebooks reduce each parameter's gradient over a wave (WaveActiveSum) and add it with one
# atomic per wave; the samples add every pixel's (sample's) gradient with its own atomic. The
# "per-pixel atomics" rows run our cells with the sample's reduction written in instead, so that
# ours against slangpy is engine against engine and wave-summed against per-pixel is the algorithm.
WAVE_SUM = re.compile(r"float s = WaveActiveSum\((\w+)\);[^\n]*\n\s*if \(WaveIsFirstLane\(\)\)\n"
                      r"\s*InterlockedAdd\(grads\[(\w+)\], s\);")


def per_pixel_atomics(body: str) -> str:
    """A cell's wave-summed gradient atomics replaced by one atomic per pixel (the samples' reduction)."""
    out, n = WAVE_SUM.subn(r"InterlockedAdd(grads[\2], \1);   // bench: one atomic per pixel/sample, as slangpy's", body)
    return out if n else body


def notebook_cells(name: str) -> dict[str, str]:
    """The `%%slang NAME` cells of a notebook: the bench runs the notebook's own Slang."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    out = {}
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] == "code" and src.startswith("%%slang "):
            head, _, body = src.partition("\n")
            out[head.split()[1]] = body
    return out


def target_image(size: int) -> np.ndarray:
    from PIL import Image
    import matplotlib.cbook as cbook

    with Image.open(cbook.get_sample_data("grace_hopper.jpg")) as im:
        w, h = im.size
        side = min(w, h)
        im = im.convert("RGB").crop(((w - side) // 2, (h - side) // 2, (w + side) // 2, (h + side) // 2))
        rgb = np.asarray(im.resize((size, size), Image.LANCZOS), np.float32) / 255.0
    return np.concatenate([rgb, np.ones((size, size, 1), np.float32)], axis=-1)


def xavier(rng: np.random.Generator, n_in: int, n_out: int) -> np.ndarray:
    a = math.sqrt(3.0) * math.sqrt(2.0 / (n_in + n_out))
    return rng.uniform(-a, a, (n_out, n_in)).astype(np.float32)


# -- ours ---------------------------------------------------------------------------------------------

class Ours:
    def __init__(self, device: str, isolate: bool = True) -> None:
        import tempfile
        import slang_kernel as sk

        self.tmp = tempfile.TemporaryDirectory()
        self.s = sk.Session(backend=device, isolate=isolate, cache_dir=self.tmp.name)
        self.b = self.s.backend

    def dev(self, a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a)
        if "device_buffers" in self.b.capabilities:
            return self.b.buffer(a)
        import cupy
        return cupy.asarray(a)

    def host(self, d: Any) -> np.ndarray:
        return d.numpy() if hasattr(d, "numpy") else d.get()

    def sync(self) -> None:
        if self.b.name == "cuda":
            import cupy
            cupy.cuda.Device().synchronize()
        # the Vulkan worker waits for the device at the end of every step call

    def close(self) -> None:
        self.s.close()
        self.tmp.cleanup()


def cells(notebook: str, per_pixel: bool) -> dict[str, str]:
    got = notebook_cells(notebook)
    if not per_pixel:
        return got
    out = {name: per_pixel_atomics(body) for name, body in got.items()}
    if out == got:
        raise SystemExit(f"{notebook}: no wave-summed gradient atomics found to replace (the cells changed?)")
    return out


def open_ours(device: str, isolate: bool, notebook: str, per_pixel: bool, **defines: int) -> Ours:
    """A session with a notebook's Slang cells run in it (after its defines)."""
    o = Ours(device, isolate)
    for key, value in defines.items():
        o.s.set_define(key, str(value))
    for name, body in cells(notebook, per_pixel).items():
        o.s.run_cell(body, name=name)
    return o


def fit(o: Ours, launches: list[tuple[Any, dict[str, Any]]], shared: dict[str, Any], warm: int, iters: int,
        render: str, side: int) -> tuple[float, np.ndarray, str]:
    """Iterations/s of a Step of `launches`, then the (side, side, 4) frame kernel `render` draws."""
    from slang_kernel.steps import Step

    step = Step(launches, shared=shared)
    its = rate(step, o.sync, warm, iters)
    image = o.dev(np.zeros((side * side, 4), np.float32))
    o.s.kernel(render)(threads=(side, side, 1), image=image, size=(side, side), **shared)
    frame, mode = o.host(image).reshape(side, side, 4), step.mode
    o.close()
    return its, frame, mode


def ours_splat(device: str, size: int, blobs: int, warm: int, iters: int, isolate: bool,
               per_pixel: bool = False) -> tuple[float, float, str]:
    o = open_ours(device, isolate, "10_gaussian_fit.ipynb", per_pixel, ATOMIC_GRADS=1, BLOB_COUNT=blobs)
    target = target_image(size)
    P = blobs * 9
    rng = np.random.default_rng(0)
    shared = dict(blobs=o.dev(rng.random(P, dtype=np.float32)), grads=o.dev(np.zeros(P, np.float32)))
    moments, tgt = o.dev(np.zeros(2 * P, np.float32)), o.dev(target.reshape(-1, 4))
    k = o.s.kernel
    its, frame, mode = fit(o, [(k("splatTrain"), dict(threads=(size, size, 1), target=tgt, size=(size, size))),
                               (k("adamUpdate"), dict(threads=P, moments=moments, count=P))],
                           shared, warm, iters, "splatRender", size)
    return its, splat_loss(frame, target), mode


def ours_neural(device: str, res: int, batch: int, warm: int, iters: int, isolate: bool,
                per_pixel: bool = False) -> tuple[float, float, str]:
    o = open_ours(device, isolate, "11_neural_texture.ipynb", per_pixel, ATOMIC_GRADS=1, HIDDEN=64, SAMPLES_PER_THREAD=1)
    target = target_image(res)
    rng = np.random.default_rng(0)
    layers = [(24, 64), (64, 64), (64, 64), (64, 3)]
    weights = np.concatenate([x for i, n in layers for x in (xavier(rng, i, n).ravel(), np.zeros(n, np.float32))])
    P = weights.size
    seeds = rng.integers(0, 2**32, batch, dtype=np.uint64).astype(np.uint32)
    shared = dict(params=o.dev(weights), grads=o.dev(np.zeros(P, np.float32)))
    state, rs, tgt = o.dev(np.zeros((P, 4), np.float32)), o.dev(seeds), o.dev(target.reshape(-1, 4))
    k = o.s.kernel
    its, frame, mode = fit(o, [(k("trainTexture"), dict(threads=batch, rng=rs, target=tgt, size=(res, res),
                                                        lossScale=1.0 / batch)),
                               (k("adamStep"), dict(threads=P, state=state, learningRate=0.0005))],
                           shared, warm, iters, "evalModel", res)
    return its, neural_loss(frame, target), mode


def splat_loss(frame: np.ndarray, target: np.ndarray) -> float:
    return float(((frame[..., :3] - target[..., :3]) ** 2).sum(axis=-1).mean())


def neural_loss(frame: np.ndarray, target: np.ndarray) -> float:
    return float(((frame[..., :3] - target[..., :3]) ** 2).mean())


# -- slangpy ------------------------------------------------------------------------------------------

def spy_device(device: str) -> Any:
    import slangpy as spy

    dt = {"cuda": spy.DeviceType.cuda, "vulkan": spy.DeviceType.vulkan}[device]
    return spy, spy.Device(type=dt, compiler_options={"include_paths": [spy.SHADER_PATH, str(PEERS)]})


RECOMPUTE = re.compile(r"\[Differentiable\](\s*(?:static Gaussian2D load|float4 eval)\()")


def peer_splat(device: str, size: int, blobs: int, warm: int, iters: int,
               recompute: bool = False) -> tuple[float, float, str]:
    spy, dev = spy_device(device)
    source = (PEERS / "simplediffsplatting2d_0431.slang").read_text()
    if recompute:   # the attribute our notebook carries, on the same two functions; the math is unchanged
        source, n = RECOMPUTE.subn(r"[Differentiable, PreferRecompute]\1", source)
        assert n == 2, n
    module = spy.Module.load_from_source(dev, "splat_recompute" if recompute else "splat_ported", source)
    if blobs != 200:
        raise SystemExit("the sample's shader fixes 200 blobs (SIMPLE_BLOBCOUNT)")
    target = target_image(size)
    rng = np.random.default_rng(0)
    b = spy.Tensor.from_numpy(dev, rng.random(blobs * 9, dtype=np.float32)).with_grads()
    tex = dev.create_texture(data=target, width=size, height=size, format=spy.Format.rgba32_float,
                             usage=spy.TextureUsage.shader_resource)
    ppl = spy.Tensor.empty(dev, dtype=module.float4, shape=(size, size)).with_grads()
    module.ones(ppl.grad_in)
    m1, m2 = spy.Tensor.zeros_like(b), spy.Tensor.zeros_like(b)
    cur = dev.create_texture(width=size, height=size, format=spy.Format.rgba32_float,
                             usage=spy.TextureUsage.shader_resource | spy.TextureUsage.unordered_access)

    def one() -> None:   # main.py's loop body
        module.perPixelLoss.bwds(ppl, spy.grid(shape=(size, size)), b, tex)
        module.adamUpdate(b, b.grad_out, m1, m2)

    def run(n: int) -> None:
        for _ in range(n):
            one()

    its = rate(run, dev.wait_for_idle, warm, iters)
    module.renderBlobsToTexture(cur, b, spy.grid(shape=(size, size)))
    frame = cur.to_numpy()
    return its, splat_loss(frame, target), ("[PreferRecompute] load/eval, " if recompute else "") + \
        "one call per kernel per iteration"


def peer_neural(device: str, res: int, batch: int, warm: int, iters: int) -> tuple[float, float, str]:
    spy, dev = spy_device(device)
    module = spy.Module.load_from_file(dev, "neural_texture_0431.slang")
    target = target_image(res)
    rng = np.random.default_rng(0)

    def layer(i: int, n: int) -> dict[str, Any]:
        w = spy.Tensor.from_numpy(dev, xavier(rng, i, n)).with_grads()
        return {"weights": w, "biases": spy.Tensor.from_numpy(dev, np.zeros(n, np.float32)).with_grads()}

    model = {"l0": layer(24, 64), "l1": layer(64, 64), "l2": layer(64, 64), "l3": layer(64, 3)}
    tensors = [t for lay in model.values() for t in lay.values()]
    states = [(spy.Tensor.zeros_like(t), spy.Tensor.zeros_like(t), spy.Tensor.zeros_like(t)) for t in tensors]
    seeds = spy.Tensor.from_numpy(dev, rng.integers(0, 2**32, batch, dtype=np.uint64).astype(np.uint32))
    rngs = module.RNG(seeds)
    tex = dev.create_texture(data=target, width=res, height=res, format=spy.Format.rgba32_float,
                             usage=spy.TextureUsage.shader_resource)
    sampler = dev.create_sampler(min_lod=0, max_lod=0)
    span = np.linspace(0, 1, res, dtype=np.float32)
    uvs = spy.Tensor.from_numpy(dev, np.ascontiguousarray(np.stack(np.broadcast_arrays(span[None, :], span[:, None]), axis=2)))

    def run(n: int) -> None:   # main.py: batches appended to one command encoder, one submit
        enc = dev.create_command_encoder()
        for _ in range(n):
            module.trainTexture.append_to(enc, model, rngs, tex, sampler, 1.0 / batch)
            for t, (m, v, it) in zip(tensors, states):
                module.adamStep.append_to(enc, t, t.grad_out, m, v, it, 0.0005)
        dev.submit_command_buffer(enc.finish())

    its = rate(run, dev.wait_for_idle, warm, iters)
    frame = module.evalModel(model, uvs, _result="numpy")
    return its, neural_loss(frame, target), "10 batches per command encoder"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="cuda,vulkan")
    ap.add_argument("--workloads", default="splat,neural")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="small sizes (32x32 splat, 1024-sample batches)")
    ap.add_argument("--rows", default="wave-sum,per-pixel", help="which of ours: wave-sum, per-pixel")
    ap.add_argument("--in-process", action="store_true", help="Vulkan: Session(isolate=False) (default: worker)")
    a = ap.parse_args()
    splat_size, res, batch = (32, 32, 1024) if a.quick else (256, 512, 256 * 256)
    print(f"# bench_workloads: {a.iterations} timed iterations after {a.warmup} warm-up ones; python {sys.version.split()[0]}")
    print(f"{'workload':8} {'device':7} {'gradients':10} {'ours it/s':>10} {'slangpy it/s':>13} {'ratio':>7} "
          f"{'ours loss':>10} {'slangpy loss':>13} {'loss ratio':>10}  how ours replays / how slangpy ran")
    Row = Callable[..., tuple[float, float, str]]
    runs: dict[str, tuple[Row, list[tuple[str, Row]], tuple[int, ...]]] = {
        "splat": (ours_splat, [("ported", peer_splat), ("recompute", functools.partial(peer_splat, recompute=True))], (splat_size, 200)),
        "neural": (ours_neural, [("ported", peer_neural)], (res, batch)),
    }
    for w in a.workloads.split(","):
        ours_fn, peer_fns, size = runs[w]
        for d in a.devices.split(","):
            peers = []
            for peer_label, peer_fn in peer_fns:
                try:
                    peers.append((peer_label, *peer_fn(d, *size, a.warmup, a.iterations)))
                except Exception as exc:  # noqa: BLE001 - print and go on with ours
                    print(f"{w:8} {d:7} slangpy ({peer_label}) failed: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                    peers.append((peer_label, math.nan, math.nan, "failed"))
            for label in a.rows.split(","):
                try:
                    ro, lo, how_o = ours_fn(d, *size, a.warmup, a.iterations, not a.in_process, label == "per-pixel")
                except Exception as exc:  # noqa: BLE001 - print and go on to the next row
                    print(f"{w:8} {d:7} {label:10} ours failed: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                    continue
                for peer_label, rp, lp, how_p in peers:
                    print(f"{w:8} {d:7} {label:10} {ro:10.1f} {rp:13.1f} {ro / rp:6.2f}x {lo:10.5f} {lp:13.5f} "
                          f"{lo / lp:10.3f}  {how_o} / {peer_label}: {how_p}", flush=True)

if __name__ == "__main__":
    main()
