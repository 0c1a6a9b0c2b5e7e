"""Content-addressed disk cache, written atomically (temp file + os.replace), safe to delete.

Keys hash everything that determines the output (compiler build, target, options, sources), so
entries never need invalidating. Each entry carries a checksum: a truncated or corrupted entry
reads as a miss and is rebuilt. A cache directory that cannot be written falls back to memory
with one warning.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import pickle
import tempfile
import warnings
from pathlib import Path
from typing import Any

__all__ = ["DiskCache", "compiler_fingerprint", "default_cache_dir", "digest"]

_MAGIC = b"SKC1"


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:32]


def compiler_fingerprint() -> str:
    """Identify the compiler build without loading it (slangpy version, library file name)."""
    from .compiler._lib import find_library

    try:
        version = importlib.metadata.version("slangpy")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    try:
        lib = find_library().name
    except Exception:
        lib = "missing"
    # Our own reflection/worker code shapes cached results too: a change to it is a new key.
    here = Path(__file__).parent / "compiler"
    code = digest(*(f.read_bytes() for f in sorted(here.glob("_w*.py"))), (here / "reflection.py").read_bytes())
    return f"slangpy-{version}/{lib}/{code[:12]}"


def default_cache_dir() -> Path:
    env = os.environ.get("SLANG_KERNEL_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "slang-kernel"


class DiskCache:
    def __init__(self, root: Path | str | None = None, *, enabled: bool = True) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.enabled = enabled
        self._memory: dict[tuple[str, str], bytes] = {}
        self._writable = enabled and self._check_writable()

    def _check_writable(self) -> bool:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".probe-"):
                pass
            return True
        except OSError as exc:
            warnings.warn(
                f"slang-kernel cache directory {self.root} is not writable ({exc}); caching in memory "
                "only. Set SLANG_KERNEL_CACHE_DIR to a writable folder to keep compiles across sessions.",
                stacklevel=3,
            )
            return False

    @property
    def writable(self) -> bool:
        """Entries go to disk (False: a read-only or unusable cache directory; memory only)."""
        return self._writable

    def path(self, kind: str, key: str, suffix: str = "") -> Path:
        return self.root / kind / key[:2] / f"{key}{suffix}"

    def get(self, kind: str, key: str) -> bytes | None:
        if not self.enabled:
            return None
        hit = self._memory.get((kind, key))
        if hit is not None or not self._writable:
            return hit
        try:
            raw = self.path(kind, key).read_bytes()
        except OSError:
            return None
        if len(raw) < 36 or raw[:4] != _MAGIC or hashlib.sha256(raw[36:]).digest()[:32] != raw[4:36]:
            return None  # truncated or corrupted: a miss, rebuilt and rewritten by the caller
        return raw[36:]

    def put(self, kind: str, key: str, data: bytes) -> None:
        if not self.enabled:
            return
        if not self._writable:
            self._memory[(kind, key)] = data
            return
        self.write_atomic(self.path(kind, key), _MAGIC + hashlib.sha256(data).digest() + data)

    def get_object(self, kind: str, key: str) -> Any:
        """A pickled entry, or None (a miss; also for an entry an older version wrote and that no
        longer unpickles)."""
        hit = self.get(kind, key)
        try:
            return pickle.loads(hit) if hit is not None else None
        except Exception:
            return None

    def put_object(self, kind: str, key: str, obj: Any) -> None:
        self.put(kind, key, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def write_atomic(self, target: Path, data: bytes) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a cache that cannot be written only costs time

    def scratch_dir(self) -> Path:
        """A private folder for build intermediates (never the working directory)."""
        base = self.root if self._writable else Path(tempfile.gettempdir())
        path = base / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path
