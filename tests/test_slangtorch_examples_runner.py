"""bench/slangtorch_examples.py's machinery without a GPU: a script run unchanged with `import slangtorch`
aliased to ours, its `loss` values read as it runs (top level and inside its functions), its final
tensors saved, an error reported with what was recorded before it, and two sides compared.
(slang-torch's examples themselves launch CUDA kernels: they run on the GPU machine.)"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location("slangtorch_examples", ROOT / "bench" / "slangtorch_examples.py")
assert _spec is not None and _spec.loader is not None
runner = importlib.util.module_from_spec(_spec)
sys.modules["slangtorch_examples"] = runner
_spec.loader.exec_module(runner)

TOY_SLANG = """
[CUDAKernel]
void scale(TensorView<float> x, TensorView<float> y)
{
    uint i = (cudaThreadIdx() + cudaBlockIdx() * cudaBlockDim()).x;
    y[i] = 2.0 * x[i];
}
"""

TRAIN = """
import slangtorch
import torch
from toy_helpers import LEVELS     # a sibling module, found as `python train.py` finds it
m = slangtorch.loadModule("toy.slang")
kernels = m.kernels
w = torch.rand(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)

def pyramid(levels):
    loss = 0
    for k in range(levels):          # partial sums: not recorded, only what the helper returns
        loss += ((w - 1.0) ** 2).sum() / levels
    return loss

def optimize(i):
    loss = pyramid(LEVELS)
    opt.zero_grad()
    loss.backward()
    opt.step()

for i in range(5):
    optimize(i)
loss = ((w - 1.0) ** 2).sum()   # and once at the top level
if FAIL:
    raise RuntimeError("the example stopped here")
"""


def _examples(tmp_path: Path, fail: bool) -> Path:
    folder = tmp_path / "checkout" / "examples" / "toy"
    folder.mkdir(parents=True)
    (folder / "toy.slang").write_text(TOY_SLANG)
    (folder / "train.py").write_text(TRAIN.replace("FAIL", str(fail)))
    (folder / "toy_helpers.py").write_text("LEVELS = 3\n")
    return tmp_path / "checkout"


@pytest.mark.slow
@pytest.mark.parametrize("fail", [False, True])
def test_a_script_runs_unchanged_with_its_losses_and_tensors_recorded(tmp_path: Path, fail: bool) -> None:
    ex = runner.Example("toy", "toy", "train.py", ("w", "kernels"))
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = runner.run_side("ours", ex, _examples(tmp_path, fail), tmp_path / "work", out, env, timeout=300)
    assert "slang_kernel" in r.get("slangtorch", ""), r     # `import slangtorch` was ours
    losses = r["losses"]
    assert len(losses) == 6 and losses[-1] < losses[0]      # 5 in optimize(i), 1 at the top level
    assert list(r["outputs"]) == ["w"]                      # tensors only ("kernels" is a tuple)
    if fail:
        assert r["error"] == "RuntimeError: the example stopped here"
    else:
        assert r["error"] is None
    same = runner.compare(r, r)
    assert same["iterations"] == [6, 6] and same["tensors"]["w"]["max_abs_diff"] == 0.0
    assert same["same"] is not fail and same["stopped"] == (["ours", "ours"] if fail else [])   # no verdict on a stop
    other = dict(r, losses=[x * 1.01 for x in losses])
    assert not runner.compare(r, other)["same"]


def test_without_cuda_the_runner_says_where_to_run_it(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the message where torch has no CUDA")
    (tmp_path / "examples").mkdir()
    import subprocess

    p = subprocess.run([sys.executable, str(ROOT / "bench" / "slangtorch_examples.py"), "--examples", str(tmp_path),
                        "--out", str(tmp_path / "out"), "--sides", "ours"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "run this on the GPU machine" in p.stdout
