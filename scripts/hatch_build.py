"""Hatchling build hook (pyproject.toml: [tool.hatch.build.targets.wheel.hooks.custom]).

magics/ and widgets/ are installed as slang_kernel.magics and slang_kernel.widgets. A wheel gets them
by force-include; an editable install (`pip install -e .`) cannot (hatchling's editables only map
top-level names), so this hook gives the editable wheel a small import hook instead: a .pth file
that appends a finder resolving those two names to the folders in this checkout.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SUBPACKAGES = {"slang_kernel.magics": "magics", "slang_kernel.widgets": "widgets"}
MODULE = "_slang_kernel_editable"

FINDER = '''\
"""Editable install of slang-kernel (written by scripts/hatch_build.py): {names} come from {root}."""
import importlib.util
import os
import sys

_MAP = {mapping!r}


class SubpackageFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        where = _MAP.get(fullname)
        if where is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(where, "__init__.py"), submodule_search_locations=[where])

    @classmethod
    def invalidate_caches(cls):
        pass


sys.meta_path.append(SubpackageFinder)  # after the path finders: only these two names reach it
'''


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "editable":
            return
        mapping = {name: os.path.join(self.root, folder) for name, folder in SUBPACKAGES.items()}
        self._tmp = tempfile.TemporaryDirectory(prefix="slang-kernel-editable-")
        finder = os.path.join(self._tmp.name, f"{MODULE}.py")
        pth = os.path.join(self._tmp.name, f"{MODULE}.pth")
        with open(finder, "w") as f:
            f.write(FINDER.format(names=", ".join(mapping), root=self.root, mapping=mapping))
        with open(pth, "w") as f:
            f.write(f"import {MODULE}\n")
        # replaces the wheel's force-include (the copies of magics/ and widgets/) in the editable wheel
        build_data["force_include_editable"][finder] = f"{MODULE}.py"
        build_data["force_include_editable"][pth] = f"{MODULE}.pth"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
