"""Regenerate tests/data/bad_cells/gen/: mutations of valid cells that the compiler rejects.

    .venv/bin/python tests/data/bad_cells/make_corpus.py [COUNT]

Mutations (seeded, deterministic): delete a token, swap a type for another, truncate, duplicate a
token, rename an identifier to an undefined one, insert stray punctuation. A mutant that still
compiles is not kept (the corpus is of cells that must produce diagnostics); one that crashes the
compiler goes to tests/data/crashers/.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = sorted((HERE / "seeds").glob("*.slang"))
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+\.?\d*f?|==|<=|>=|&&|\|\||[^\s\w]")
TYPES = ["float", "int", "uint", "float2", "float3", "float4", "bool", "float3x3", "int2", "half", "double",
         "RWStructuredBuffer<float>", "StructuredBuffer<int>", "void", "Texture2D", "DifferentialPair<float>"]
PUNCT = [";", "{", "}", "(", ")", ",", "<", ">", "[", "]", ".", ":", "=", "#", "@", "\\"]


def mutate(src: str, rng: random.Random) -> tuple[str, str]:
    toks = [(m.start(), m.end()) for m in TOKEN.finditer(src)]
    kind = rng.choice(["delete", "delete", "swap_type", "truncate", "duplicate", "rename", "insert"])
    a, b = rng.choice(toks)
    if kind == "delete":
        return kind, src[:a] + src[b:]
    if kind == "duplicate":
        return kind, src[:b] + " " + src[a:b] + src[b:]
    if kind == "truncate":
        cut = rng.randrange(1, len(src) - 1)
        return kind, src[:cut]
    if kind == "insert":
        return kind, src[:a] + rng.choice(PUNCT) + src[a:]
    if kind == "rename":
        idents = [(s, e) for s, e in toks if re.match(r"[A-Za-z_]", src[s:e])]
        s, e = rng.choice(idents)
        return kind, src[:s] + src[s:e] + "_undefined" + src[e:]
    # swap_type: replace one occurrence of a type name by another
    hits = [m for m in re.finditer(r"\b(" + "|".join(re.escape(t) for t in TYPES[:11]) + r")\b", src)]
    if not hits:
        return "delete", src[:a] + src[b:]
    m = rng.choice(hits)
    other = rng.choice([t for t in TYPES if t != m.group(0)])
    return kind, src[:m.start()] + other + src[m.end():]


def main(count: int = 200) -> None:
    import slang_kernel as sk

    out = HERE / "gen"
    out.mkdir(exist_ok=True)
    for old in out.glob("*.slang"):
        old.unlink()
    rng = random.Random(20261130)
    s = sk.Session(backend="cpu", cache=False)
    seeds = [p.read_text() for p in SEEDS]
    kept = tried = crashed = 0
    seen: set[str] = set()
    while kept < count and tried < count * 20:
        tried += 1
        i = rng.randrange(len(seeds))
        kind, text = mutate(seeds[i], rng)
        if rng.random() < 0.3:  # a second mutation now and then
            kind2, text = mutate(text, rng)
            kind = f"{kind}+{kind2}"
        if text in seen or not text.strip():
            continue
        seen.add(text)
        try:
            s.run_cell(text, name="mutant")
            s.remove_cell("mutant")
            continue  # still valid: not a bad cell
        except sk.SlangCompilerCrash:
            crashed += 1
            (HERE.parent / "crashers" / f"gen_{SEEDS[i].stem}_{crashed:03d}.slang").write_text(text)
            continue
        except sk.SlangCompileError:
            pass
        kept += 1
        (out / f"{kept:03d}_{SEEDS[i].stem}_{kind.replace('+', '_')}.slang").write_text(text)
    s.close()
    print(f"kept {kept} of {tried} mutants ({crashed} crashed the compiler)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
