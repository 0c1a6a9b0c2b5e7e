"""The cold row of the edit loop (issue 41): a notebook's first Slang cell, from a fresh Python process
with empty caches to a kernel's result on the host, ours against slangpy doing the same in the same run.

    .venv/bin/python bench/bench_cold.py [--repeat 5] [--backend vulkan|cpu]

Each run is a new process (imports included, as a user meets them when a kernel starts) with its own
empty cache folder: ours `SLANG_KERNEL_CACHE_DIR`, slangpy's the process's working folder (where it
would keep a shader cache; none is configured). Ours: `Session(backend=...)`, `run_cell`, the kernel
dispatched once and its buffer read. slangpy: `create_device` of the same device type,
`Module.load_from_source`, the same kernel dispatched once (`Module.<kernel>.dispatch`) and the
buffer read. Both compile the same source; on Vulkan both emit SPIR-V for the same lavapipe device. The
contenders alternate (ours, slangpy, ours, ...) so the machine's load reaches both alike; the table
gives the median of the process times and of the time to result measured inside the process (from
the first import), each run's in the JSON line it prints.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = """
float shade(float x, float y) { return sin(x * 3.0) * cos(y * 2.0) + x * y; }
[shader("compute")][numthreads(64, 1, 1)]
void cold_kernel(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform uint n)
{
    if (t.x < n) o[t.x] = shade(t.x * 0.001, 1.0 - t.x * 0.001);
}
"""

N = 4096

OURS = """
import time; t0 = time.perf_counter()
import json, sys, numpy as np
import slang_kernel as sk
s = sk.Session(backend=sys.argv[1])
s.run_cell(sys.argv[2], name="cold")
o = np.zeros({n}, np.float32)
s.kernel("cold_kernel")(threads={n}, o=o, n={n})
print(json.dumps({{"ms": (time.perf_counter() - t0) * 1e3, "check": float(o[100])}}))
""".format(n=N)

SLANGPY = """
import time; t0 = time.perf_counter()
import json, sys, numpy as np
import slangpy as spy
kind = {{"vulkan": spy.DeviceType.vulkan, "cpu": spy.DeviceType.cpu}}[sys.argv[1]]
device = spy.create_device(type=kind)
m = spy.Module.load_from_source(device, "cold", sys.argv[2])
buf = device.create_buffer(element_count={n}, struct_size=4, usage=spy.BufferUsage.unordered_access | spy.BufferUsage.shader_resource)
m.cold_kernel.dispatch(thread_count=spy.uint3({n}, 1, 1), o=buf, n={n})
o = buf.to_numpy().view(np.float32)
print(json.dumps({{"ms": (time.perf_counter() - t0) * 1e3, "check": float(o[100])}}))
""".format(n=N)


def run_once(script: str, backend: str) -> dict[str, float]:
    """One cold process: an empty cache folder as its working folder and ours' cache; wall and inner ms."""
    with tempfile.TemporaryDirectory(prefix="sk-cold-") as tmp:
        env = dict(os.environ, SLANG_KERNEL_CACHE_DIR=os.path.join(tmp, "cache"))
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", script, backend, SOURCE], cwd=tmp, env=env,
                           capture_output=True, text=True, timeout=300)
        wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}:\n{p.stderr[-2000:]}")
    inner = json.loads(p.stdout.strip().splitlines()[-1])
    return {"wall_ms": wall, "inner_ms": float(inner["ms"]), "check": float(inner["check"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="vulkan", choices=("vulkan", "cpu"))
    a = ap.parse_args()
    print(f"# bench_cold {datetime.datetime.now():%Y-%m-%d %H:%M} {platform.machine()}, {os.cpu_count()} cores, "
          f"backend {a.backend}, load average {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[dict[str, float]]] = {"ours": [], "slangpy": []}
    for _ in range(a.repeat):
        for name, script in (("ours", OURS), ("slangpy", SLANGPY)):
            r = run_once(script, a.backend)
            runs[name].append(r)
            print(json.dumps({"side": name, **{k: round(v, 2) for k, v in r.items()}}), flush=True)
    checks = {name: rs[0]["check"] for name, rs in runs.items()}
    if abs(checks["ours"] - checks["slangpy"]) > 1e-5:
        raise SystemExit(f"the two sides disagree on o[100]: {checks}")
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall_ms", "inner_ms")} for name, rs in runs.items()}
    print(f"| first cell, empty caches, fresh process ({a.backend}) | ours | slangpy | ours relative to slangpy |")
    print("|---|---|---|---|")
    for k, label in (("wall_ms", "process start to exit"), ("inner_ms", "first import to result")):
        o, s = med["ours"][k], med["slangpy"][k]
        print(f"| {label} | {o:.0f} ms | {s:.0f} ms | {s / o:.2f}x |")


if __name__ == "__main__":
    main()
