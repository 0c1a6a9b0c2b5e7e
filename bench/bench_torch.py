"""One training step (forward + backward) of a small differentiable Slang function inside torch
autograd, on a 1M-element parameter tensor: ours (Session.function with tensors, slang_kernel.torch)
against plain torch ops of the same math, and, on CUDA where slangpy's torch integration runs, against
slangpy (`create_torch_device` + `Module.load_from_source`). Ratios are measured in this one run.

    python bench/bench_torch.py [--n 1000000] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import median_ms  # noqa: E402

import slang_kernel as sk  # noqa: E402

SRC = "[Differentiable] float bt_step(float x, float w) { return w * x * x + sin(w * x); }\n"


def torch_math(x: Any, w: Any) -> Any:
    return w * x * x + torch.sin(w * x)


def step(f: Callable[[Any, Any], Any], x: Any, w: Any, sync: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        w.grad = None
        f(x, w).sum().backward()
        sync()
    return run


def slangpy_step(x: Any, w: Any) -> Callable[[Any, Any], Any] | str:
    try:
        import slangpy as spy

        device = spy.create_torch_device(type=spy.DeviceType.cuda)
        module = spy.Module.load_from_source(device, "bt_peer", SRC)
        return lambda a, b: module.bt_step(a, b)
    except Exception as exc:   # not on this machine, or its torch integration refused: say so
        return f"{type(exc).__name__}: {exc}"[:300]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    dev = a.device
    sync: Callable[[], object] = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    card = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    print(f"# bench_torch {datetime.date.today()} on {card}, torch {torch.__version__}, n={a.n}")
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(a.n, generator=gen).to(dev)
    w = torch.rand(a.n, generator=gen).to(dev).requires_grad_()
    s = sk.Session(backend="cuda" if dev == "cuda" else "cpu")
    s.run_cell(SRC, name="bench_torch")
    ours = s.function("bt_step")
    # the gradients agree before anything is timed
    torch_math(x, w).sum().backward()
    ref = w.grad.clone()
    w.grad = None
    ours(x, w).sum().backward()
    err = float((w.grad - ref).abs().max())
    print(f"max |grad ours - grad torch| = {err:.3g}")
    rows = {"torch ops": median_ms(step(torch_math, x, w, sync), a.repeat),
            "slang_kernel": median_ms(step(ours, x, w, sync), a.repeat)}
    if dev == "cuda":
        peer = slangpy_step(x, w)
        if isinstance(peer, str):
            print(f"slangpy torch integration: not measured ({peer})")
        else:
            rows["slangpy"] = median_ms(step(peer, x, w, sync), a.repeat)
    for name, ms in rows.items():
        print(f"{name:>14}: {ms:8.2f} ms/step   slang_kernel speed relative to it: {ms / rows['slang_kernel']:.2f}x")
    s.close()


if __name__ == "__main__":
    main()
