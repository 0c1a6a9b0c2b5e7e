#!/usr/bin/env bash
# Runs on the lent H200 machine (see ../shared/GPU.md): GPU tests and benchmarks in one go, logs in $OUT.
# Carry .gpu (slangpy cp312 wheel contents + Vulkan loader debs). Usage: bash bench/gpu_run.sh [tests|torch|notebooks|textures|debugging|cpu|bench|check|workloads|paired|dask|slangtorch-examples|all]
# torch: issues 37 and 38: slang-torch's suite ours and the real wheel side by side (the wheel's nvcc builds in the
# background), the torch and slangtorch tests on CUDA; carry .gpu with slangpy, .gpu/slangtorch-*.whl.
# notebooks: notebooks 12 and 13 executed top to bottom on CUDA at full size with nbclient; carry .gpu/nbsite.tar.xz:
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 \
#     --platform any -d W nbclient ipykernel anywidget ipywidgets; unzip each wheel into D; tar cJf .gpu/nbsite.tar.xz -C D .
# textures: the texture/half/ParameterBlock conformance cases and test_cuda.py (issue 15), with where cuda_fp16.h is.
# debugging: the thread debugger, cross-backend compare and profile tests on cuda, vulkan and cpu (issue 17).
# cpu: the CPU vector path on this machine's cores (issue 16): bench_cpu_simd.py and the CPU vector-path tests.
# paired: bench_dispatch.py and bench_engine.py from an older tree (.gpu/old_main.tgz, `git archive REV | gzip`)
# and from this one, one after the other on the same machine.
set -uo pipefail
for f in .gpu/gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/site && tar xJf .gpu/slangpy-cp312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 SLANG_KERNEL_CACHE_DIR=/tmp/sk-cache
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_conformance.py tests/test_bad_input.py \
    tests/test_model.py --backends cuda,vulkan 2>&1 | tee "$OUT/conformance_gpu.log"
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_vulkan.py tests/test_cuda.py tests/test_vulkan_isolation.py \
    2>&1 | tee "$OUT/backend_tests_gpu.log"
fi
if [ "$what" = torch ]; then
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 | tee "$OUT/torch.txt"
  command -v g++ nvcc ninja | tee -a "$OUT/torch.txt"
  (timeout "${REAL_TIMEOUT:-500}" bash bench/slangtorch_suite.sh real > "$OUT/suite_real_stdout.txt" 2>&1) &
  timeout 240 bash bench/slangtorch_suite.sh ours
  timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -p no:cacheprovider -ra -q tests/test_slangtorch_*.py tests/test_torch_*.py \
    --backends cuda,cpu 2>&1 | tee "$OUT/torch_tests_gpu.log" | tail -40
  wait
  cat "$OUT/slangtorch_suite_summary.txt"
fi
if [ "$what" = notebooks ]; then
  mkdir -p /tmp/nb && tar xJf .gpu/nbsite.tar.xz -C /tmp/nb
  export PYTHONPATH=/tmp/site:/tmp/nb:$PWD MPLBACKEND=agg
  for nb in 13_torch_autograd 12_slangtorch_bezier; do
    t0=$SECONDS
    timeout 300 python3 - "$nb" <<'PY' > "$OUT/nb_$nb.log" 2>&1
import os, sys
import nbformat
from nbclient import NotebookClient
name = sys.argv[1]
nb = nbformat.read(f"notebooks/{name}.ipynb", as_version=4)
try:
    NotebookClient(nb, timeout=280, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
    print("executed", name)
finally:
    nbformat.write(nb, os.path.join(os.environ["OUT"], name + ".ipynb"))
PY
    echo "$nb: rc=$? in $((SECONDS - t0)) s" | tee -a "$OUT/notebooks.txt"
  done
fi
if [ "$what" = textures ]; then
  python3 -c "import cupy, slang_kernel.backends.cuda.fp16 as f; print('cupy', cupy.__version__, 'cuda_fp16.h:', f.fp16_include_dir(cupy))" \
    2>&1 | tee "$OUT/fp16.txt"
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_conformance_textures.py tests/test_cuda.py --backends cuda,vulkan \
    2>&1 | tee "$OUT/textures_gpu.log"
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_conformance.py tests/test_bad_input.py tests/test_conformance_params.py --backends cuda \
    2>&1 | tee "$OUT/conformance_cuda.log" | tail -25
  python3 bench/bench_cuda_textures.py 2>&1 | tee "$OUT/bench_cuda_textures.log"
fi
if [ "$what" = debugging ]; then
  python3 -m pytest -p no:cacheprovider -ra -q -s tests/test_thread_debug.py tests/test_compare.py tests/test_profile.py \
    --backends cuda,vulkan,cpu 2>&1 | tee "$OUT/debugging_gpu.log"
fi
if [ "$what" = cpu ]; then
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz|Flags" | cut -c1-200 | tee "$OUT/cpu.txt"
  python3 bench/bench_cpu_simd.py --repeat 7 2>&1 | tee "$OUT/bench_cpu_simd.log"
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_cpu_simd.py tests/test_cpu_simd_loops.py \
    tests/test_conformance.py tests/test_conformance_params.py -k "cpu or simd" 2>&1 | tee "$OUT/cpu_tests.log" | tail -8
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  python3 bench/bench_cuda.py 2>&1 | tee "$OUT/bench_cuda.log"
  python3 bench/bench_vulkan.py 2>&1 | tee "$OUT/bench_vulkan.log"
fi
if [ "$what" = check ]; then   # the GPU tests of a merged head, then the launch and readback benches
  PLAYGROUND_REFERENCE=$PWD/.gpu/pg_ref.npz timeout 420 python3 -m pytest -p no:cacheprovider -ra -q \
    tests/test_cuda.py tests/test_steps.py tests/test_finite.py tests/test_checked.py tests/test_vulkan.py \
    tests/test_conformance.py tests/test_conformance_textures.py tests/test_bad_input.py tests/test_playground_demos.py \
    --backends cuda,vulkan 2>&1 | tee "$OUT/check_gpu.log" | tail -30
  python3 bench/bench_cuda.py 2>&1 | tee "$OUT/bench_cuda.log"
  python3 bench/bench_vulkan.py --repeat 20 2>&1 | tee "$OUT/bench_vulkan.log"
fi
if [ "$what" = workloads ]; then   # issue 29: launch paths, then both training workloads against slangpy
  python3 bench/bench_cuda.py 2>&1 | tee "$OUT/bench_cuda.log"
  python3 bench/bench_vulkan.py --repeat 20 2>&1 | tee "$OUT/bench_vulkan.log"
  python3 bench/bench_workloads.py --iterations ${ITERATIONS:-100} 2>&1 | tee "$OUT/bench_workloads.log"
fi
if [ "$what" = paired ]; then
  rm -rf /tmp/old && mkdir -p /tmp/old && tar xzf .gpu/old_main.tgz -C /tmp/old
  here=$PWD
  for round in 1 2; do   # old, new, old, new: drift of the machine shows as a difference between rounds
    for tree in /tmp/old "$here"; do
      name=$([ "$tree" = "$here" ] && echo new || echo old)
      (cd "$tree" && PYTHONPATH=/tmp/site:$tree SLANG_KERNEL_CACHE_DIR=/tmp/sk-cache-$name \
        python3 "$here/bench/bench_dispatch.py" --repeat 15 2>&1 | tee "$OUT/dispatch_${name}_$round.log")
    done
  done
  python3 bench/bench_engine.py --repeat 11 2>&1 | tee "$OUT/engine_new.log"
fi
if [ "$what" = dask ]; then   # carry .gpu/dask-cp312.tar.xz (dask, distributed and their wheels, unpacked)
  tar xJf .gpu/dask-cp312.tar.xz -C /tmp/site
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_distributed.py 2>&1 | tee "$OUT/distributed_tests.log"
  python3 bench/bench_dask.py --backend cpu 2>&1 | tee "$OUT/bench_dask_cpu.log"
  python3 bench/bench_dask.py --backend cuda --log2n 26 2>&1 | tee "$OUT/bench_dask_cuda.log"
fi
if [ "$what" = slangtorch-examples ]; then   # issue 37: carry .gpu/slang-torch (examples/ of v1.3.22:
  # `git -C MIRROR archive v1.3.22 examples | tar x -C .gpu/slang-torch`, 3.5 MB) and .gpu/slangtorch-*.whl
  whl=$(ls .gpu/slangtorch-*.whl 2>/dev/null | head -1); site=""
  if [ -n "$whl" ]; then mkdir -p /tmp/real-site && python3 -m zipfile -e "$whl" /tmp/real-site && site="--real-site /tmp/real-site"; fi
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_slangtorch_views.py 2>&1 | tee "$OUT/slangtorch_views_gpu.log"
  python3 bench/slangtorch_examples.py --examples .gpu/slang-torch $site --out "$OUT/slangtorch_examples" 2>&1 |
    tee "$OUT/slangtorch_examples.log"
fi
