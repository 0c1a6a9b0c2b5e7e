"""What the Vulkan backend tells the compiler and the user before a device exists (split from device):
the install advice, which adapters are software, the layout options, a module source's head."""

from __future__ import annotations

__all__ = ["INSTALL_HINT", "compile_options", "software_adapter"]

INSTALL_HINT = (
    "install a Vulkan driver: on Debian 12 `apt-get install -t bookworm-backports mesa-vulkan-drivers "
    "libvulkan1` (Mesa >= 25 lavapipe; needs `deb http://deb.debian.org/debian bookworm-backports main` "
    "in the apt sources), on Debian 13 / Ubuntu 24.04 `apt-get install mesa-vulkan-drivers libvulkan1`; "
    "with an NVIDIA GPU the NVIDIA driver's Vulkan ICD. Check with `vulkaninfo --summary` (vulkan-tools)")



def software_adapter(adapter: str) -> bool:
    """Whether a Vulkan adapter name is a CPU implementation (Mesa lavapipe/llvmpipe, SwiftShader), not a GPU."""
    return any(word in adapter.lower() for word in ("llvmpipe", "lavapipe", "swiftshader"))


def compile_options(target: str) -> tuple[str, ...]:
    """sgl compiles for Vulkan with scalar block layout and row-major matrices: reflect the same
    layouts (buffer element dtypes come from this reflection)."""
    if target in ("spirv", "spirv-asm", "glsl"):
        return ("-fvk-use-scalar-layout", "-matrix-layout-row-major")
    return ()


def _split_head(source: str) -> tuple[str, str, str]:
    """A module source's head (its #define lines and the one line of imports), the newline, the text."""
    lines = source.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith("#define "):
        i += 1
    head = "\n".join(lines[: i + 1])
    return head, "\n", "\n".join(lines[i + 1:])
