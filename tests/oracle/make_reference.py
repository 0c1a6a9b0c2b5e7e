"""Write the oracle's results for every demo to an .npz, for machines without wgpu (the H200):
`python -m tests.oracle.make_reference out.npz`, then `PLAYGROUND_REFERENCE=out.npz pytest
tests/test_playground_demos.py` there."""

from __future__ import annotations

import sys

import numpy as np

from tests.test_playground_demos import DEMOS, _oracle


def main(path: str) -> None:
    out: dict[str, np.ndarray] = {}
    for demo in DEMOS:
        r = _oracle(demo)
        if not r["runnable"]:
            continue
        out[f"{demo}/printed"] = np.array(r["printed"])
        if "canvas" in r:
            out[f"{demo}/canvas"] = r["canvas"]
    np.savez_compressed(path, **out)
    print(f"{path}: {sorted(out)}")


if __name__ == "__main__":
    main(sys.argv[1])
