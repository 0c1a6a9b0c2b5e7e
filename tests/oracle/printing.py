"""The Playground's printf, by the Playground's own code: canvasUtils.ts run in node.

The printed text of a demo is decoded and formatted by `parsePrintfBuffer` of the public
shader-slang/slang-playground's `engine/playground-render-canvas/src/canvasUtils.ts`, vendored
unchanged in tests/data/playground/runtime/ (commit and licence in tests/data/playground/SOURCE.md),
not by a port: node runs it. Node 20 cannot run TypeScript, so `strip_types` removes the type syntax
that file uses (a type-only import, a `type` alias, annotations on parameters, returns and `const`
declarations, a non-null `!`) and nothing else; a construct it does not know makes node fail with a
syntax error, never a different program. (Checked against `tsc` 5.6: the same tokens.)

What the browser adds and this does not: the GPU buffer, read by the caller into uint32 words (the
function receives an object whose getMappedRange() returns them, as GPUBuffer's does).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CANVAS_UTILS", "node", "parse_printf_buffer", "strip_types"]

CANVAS_UTILS = Path(__file__).parent.parent / "data" / "playground" / "runtime" / "canvasUtils.ts"
_ELEMENT_BYTES = 12   # RenderCanvas.vue: parsePrintfBuffer(..., 12), FormattedStruct {type, low, high}


def node() -> str | None:
    """The node executable, or None (the print demos then skip, saying so)."""
    return shutil.which("node")


def _params(params: str) -> str:
    """A parameter list without its type annotations (`a: T, { b }: U & { c: 'd' }` -> `a, { b }`)."""
    out, depth, keep = [], 0, True
    for ch in params:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if depth == 0 and ch == ":":
            keep = False
            continue
        if depth == 0 and ch == ",":
            keep = True
        if keep:
            out.append(ch)
    return "".join(out).rstrip()


def strip_types(ts: str) -> str:
    """The JavaScript of canvasUtils.ts: its TypeScript-only syntax removed (see the module docstring)."""
    js = re.sub(r"^import \{[^}]*\} from \"slang-playground-shared\";\n", "", ts, flags=re.M)
    js = re.sub(r"^type \w+ = .*?^\};\n", "", js, flags=re.M | re.S)
    js = re.sub(r"^(\s*(?:const|let|var) \w+): [\w\[\]<>]+ =", r"\1 =", js, flags=re.M)
    js = re.sub(r"(?<=[\])\w])!(?=[;,).\]])", "", js)

    def header(m: re.Match[str]) -> str:
        return f"{m.group(1)}({_params(m.group(2))}) {{"
    # function headers: `function f(params): R {` and `constructor(params) {`
    head = r"^(\s*(?:export )?(?:function \w+|constructor))\((.*)\)(?:\s*:\s*[^{]+?)?\s*\{$"
    return re.sub(head, header, js, flags=re.M)


_DRIVER = """
const input = JSON.parse(process.argv[1]);
// compiler.ts (slang-compilation-engine): the reflection's {string: hash} turned into {hash: string}
let hashedStrings = input.hashedStrings ? Object.fromEntries(Object.entries(input.hashedStrings).map(entry => entry.reverse())) : {};
const words = Uint32Array.from(input.words);
const printfValueResource = { getMappedRange: () => words.buffer };
process.stdout.write(JSON.stringify(parsePrintfBuffer(hashedStrings, printfValueResource, input.elementSize)));
"""


def parse_printf_buffer(hashed_strings: dict[str, Any] | None, words: np.ndarray) -> list[str]:
    """The lines the Playground shows for a print buffer (`words`: its uint32 contents), given the
    reflection JSON's `hashedStrings` ({string: hash}, as Slang writes it)."""
    exe = node()
    if exe is None:
        raise RuntimeError("node is not installed: the Playground's printf (canvasUtils.ts) runs in node")
    script = strip_types(CANVAS_UTILS.read_text()) + _DRIVER
    arg = json.dumps({"hashedStrings": hashed_strings, "words": [int(w) for w in words.view(np.uint32)],
                      "elementSize": _ELEMENT_BYTES})
    done = subprocess.run([exe, "--input-type=module", "-e", script, arg], capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"canvasUtils.ts in node failed:\n{done.stderr}")
    return list(json.loads(done.stdout))
