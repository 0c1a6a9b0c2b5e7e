#!/usr/bin/env bash
# slang-torch's own test suite (tests/test.py of v1.3.22, vendored unchanged in tests/data/slang_torch)
# on a GPU machine, run twice from scratch copies of that folder:
#   ours: `import slangtorch` is slang_kernel.slangtorch (a conftest.py written into the copy aliases it;
#         test.py and the .slang files are not touched)
#   real: the slangtorch wheel (`pip download --no-deps slangtorch==1.3.21` -> .gpu/, carried along;
#         unpacked into a scratch folder put first on PYTHONPATH), built by its own nvcc/ninja path
# and prints both summaries side by side. Logs and JUnit XML go to $OUT.
#
#   bash bench/slangtorch_suite.sh [ours|real|both]     (default both; carry .gpu, see ../shared/GPU.md)
#
# Needs on that machine: CUDA torch, CuPy, slangpy (from .gpu/slangpy-cp312.tar.xz) for ours; nvcc and
# ninja for the real wheel. Each side starts with empty caches (its own SLANG_KERNEL_CACHE_DIR,
# CUPY_CACHE_DIR and TORCH_EXTENSIONS_DIR), so the first loads of the run are cold builds.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-both}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/slangtorch-suite.XXXXXX)
if [ -f "$ROOT/.gpu/slangpy-cp312.tar.xz" ] && ! python3 -c "import slangpy" 2>/dev/null; then
  mkdir -p /tmp/site && tar xJf "$ROOT/.gpu/slangpy-cp312.tar.xz" -C /tmp/site
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/slangtorch_suite_gpu.txt"

# Check that the vendored suite is still byte for byte slang-torch's (the git blob ids in its README).
python3 - "$ROOT/tests/data/slang_torch" <<'PY' | tee -a "$OUT/slangtorch_suite_summary.txt"
import hashlib, pathlib, re, sys
folder = pathlib.Path(sys.argv[1])
for blob, name in re.findall(r"^([0-9a-f]{40})  (\S+)$", (folder / "README.md").read_text(), re.M):
    data = (folder / name).read_bytes()
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
        print(f"MODIFIED: tests/data/slang_torch/{name} is not slang-torch v1.3.22's")
PY

run_side() {   # $1 = ours|real
  local side=$1 dir="$WORK/$1/tests"
  mkdir -p "$WORK/$side" && cp -r "$ROOT/tests/data/slang_torch" "$dir"
  local pp="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  if [ "$side" = ours ]; then
    printf '%s\n' '"""Written by bench/slangtorch_suite.sh: `import slangtorch` gets slang_kernel.slangtorch."""' \
      'import sys' 'import slang_kernel.slangtorch' 'sys.modules["slangtorch"] = slang_kernel.slangtorch' > "$dir/conftest.py"
  else
    local whl; whl=$(ls "$ROOT"/.gpu/slangtorch-*.whl 2>/dev/null | head -1)
    if [ -z "$whl" ]; then
      echo "real: skipped: no .gpu/slangtorch-*.whl (pip download --no-deps slangtorch==1.3.21 -d .gpu)" |
        tee -a "$OUT/slangtorch_suite_summary.txt"
      return
    fi
    mkdir -p "$WORK/real/site" && python3 -m zipfile -e "$whl" "$WORK/real/site" && chmod +x "$WORK"/real/site/slangtorch/bin/* 2>/dev/null
    pp="$WORK/real/site:$pp"
  fi
  local t0=$SECONDS
  (cd "$dir" && PYTHONPATH="$pp" SLANG_KERNEL_CACHE_DIR="$WORK/$side/sk-cache" CUPY_CACHE_DIR="$WORK/$side/cupy-cache" \
     TORCH_EXTENSIONS_DIR="$WORK/$side/torch-ext" python3 -m pytest -p no:cacheprovider --import-mode=importlib \
     -ra -q --junitxml="$OUT/slangtorch_suite_$side.xml" test.py) > "$OUT/slangtorch_suite_$side.log" 2>&1
  echo "$side: $(tail -1 "$OUT/slangtorch_suite_$side.log") (whole run $((SECONDS - t0)) s)" | tee -a "$OUT/slangtorch_suite_summary.txt"
}

case "$what" in
  ours) run_side ours ;;
  real) run_side real ;;
  both) run_side ours; run_side real ;;
  *) echo "usage: $0 [ours|real|both]" >&2; exit 2 ;;
esac
echo "scratch copies (with the real wheel's .slangtorch_cache builds): $WORK"
