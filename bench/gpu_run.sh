#!/usr/bin/env bash
# Runs on the lent H200 machine (see ../shared/GPU.md): GPU tests and benchmarks in one go, logs in $OUT.
# Carry .gpu (slangpy cp312 wheel contents + Vulkan loader debs). Usage: bash bench/gpu_run.sh [tests|bench|all]
set -uo pipefail
for f in .gpu/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/site && tar xJf .gpu/slangpy-cp312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 SLANG_KERNEL_CACHE_DIR=/tmp/sk-cache
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_conformance.py tests/test_bad_input.py \
    --backends cuda,vulkan 2>&1 | tee "$OUT/conformance_gpu.log"
  python3 -m pytest -p no:cacheprovider -ra -q tests/test_vulkan.py tests/test_cuda.py 2>&1 | tee "$OUT/backend_tests_gpu.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  python3 bench/bench_cuda.py 2>&1 | tee "$OUT/bench_cuda.log"
  python3 bench/bench_vulkan.py 2>&1 | tee "$OUT/bench_vulkan.log"
fi
