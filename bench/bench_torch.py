"""One training step (forward + backward) of a small differentiable Slang function inside torch
autograd, on a 1M-element parameter tensor: ours (Session.function with tensors, slang_kernel.torch;
and the same math as a kernel pair, slang_kernel.torch.ops.KernelOp) against plain torch ops of the
same math, and against slangpy's torch integration (`create_torch_device` + `Module.load_from_source`)
where it runs (it needs a CUDA build of torch; otherwise the reason is printed). Ratios are measured
in this one run, the contenders timed in turn (round robin), so a change in the machine's load
reaches all of them alike.

    python bench/bench_torch.py [--n 1000000] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import slang_kernel as sk  # noqa: E402
from slang_kernel.torch.ops import KernelOp  # noqa: E402

SRC = "[Differentiable] float bt_step(float x, float w) { return w * x * x + sin(w * x); }\n"
KERNELS = """
[shader("compute")][numthreads(64, 1, 1)]
void bt_fwd(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> w,
            uniform RWStructuredBuffer<float> y, uniform uint n)
{ if (t.x < n) y[t.x] = bt_step(x[t.x], w[t.x]); }
[shader("compute")][numthreads(64, 1, 1)]
void bt_bwd(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<float> x, uniform StructuredBuffer<float> w,
            uniform StructuredBuffer<float> grad_y, uniform RWStructuredBuffer<float> grad_w, uniform uint n)
{
    if (t.x >= n) return;
    var dw = diffPair(w[t.x]);
    var dx = diffPair(x[t.x]);   // x gets no gradient here (no grad_x): the op treats it as data
    bwd_diff(bt_step)(dx, dw, grad_y[t.x]);
    grad_w[t.x] = dw.d;
}
"""


def torch_math(x: Any, w: Any) -> Any:
    return w * x * x + torch.sin(w * x)


def step(f: Callable[[Any, Any], Any], x: Any, w: Any, sync: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        w.grad = None
        f(x, w).sum().backward()
        sync()
    return run


def slangpy_step(dev: str) -> Callable[[Any, Any], Any] | str:
    try:
        import slangpy as spy

        device = spy.create_torch_device(type=spy.DeviceType.cuda if dev == "cuda" else spy.DeviceType.vulkan)
        module = spy.Module.load_from_source(device, "bt_peer", SRC)
        probe = torch.zeros(1, device=dev)
        module.bt_step(probe, probe)   # slangpy checks for its torch bridge (slangpy-torch) at the first call
        return lambda a, b: module.bt_step(a, b)
    except Exception as exc:   # not on this machine, or its torch integration refused: say so
        return f"{type(exc).__name__}: {exc}"[:300]


def round_robin(steps: dict[str, Callable[[], None]], repeat: int, warm: int = 3) -> dict[str, float]:
    """Median ms per step of each contender, timed in turn: one of each per round."""
    for run in steps.values():
        for _ in range(warm):
            run()
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeat):
        for name, run in steps.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    dev = a.device
    sync: Callable[[], object] = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    card = torch.cuda.get_device_name() if dev == "cuda" else f"CPU, {os.cpu_count()} cores"
    print(f"# bench_torch {datetime.date.today()} on {card}, torch {torch.__version__}, n={a.n}, "
          f"load average {os.getloadavg()[0]:.1f}")
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(a.n, generator=gen).to(dev)
    w = torch.rand(a.n, generator=gen).to(dev).requires_grad_()
    s = sk.Session(backend="cuda" if dev == "cuda" else "cpu")
    s.run_cell(SRC + KERNELS, name="bench_torch")
    ours = s.function("bt_step")
    op = KernelOp(s.kernel("bt_fwd"), s.kernel("bt_bwd"), inputs=("x", "w"), outputs=("y",))
    def as_op(xx: Any, ww: Any) -> Any:
        return op(x=xx, w=ww, n=a.n)
    contenders: dict[str, Callable[[Any, Any], Any]] = {"torch ops": torch_math, "slang_kernel": ours,
                                                       "KernelOp": as_op}
    peer = slangpy_step(dev)
    if isinstance(peer, str):
        print(f"slangpy torch integration: not measured ({peer})")
    else:
        contenders["slangpy"] = peer
    # the gradients agree before anything is timed
    torch_math(x, w).sum().backward()
    ref = w.grad.clone()
    for name, f in contenders.items():
        w.grad = None
        f(x, w).sum().backward()
        print(f"max |grad {name} - grad torch| = {float((w.grad - ref).abs().max()):.3g}")
    rows = round_robin({k: step(f, x, w, sync) for k, f in contenders.items()}, a.repeat)
    for name, ms in rows.items():
        print(f"{name:>14}: {ms:8.2f} ms/step   slang_kernel speed relative to it: {ms / rows['slang_kernel']:.2f}x")
    s.close()


if __name__ == "__main__":
    main()
