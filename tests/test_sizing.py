"""notebook_size: the full size on a GPU, the small one on the CPU and on software Vulkan; the
notebook's FULL_SIZE line and $SLANG_KERNEL_QUICK override the device, in that order."""

from __future__ import annotations

import pytest

import slang_kernel as sk
from slang_kernel.backends.vulkan.device import software_adapter
from slang_kernel.sizing import notebook_size

SIZES = dict(small="32x32, about 5 s", large="256x256, about 20 s on a GPU")


def test_each_backend_says_whether_it_is_a_gpu(session: sk.Session) -> None:
    b = session.backend
    if b.name == "cpu":
        assert b.gpu is False
    elif b.name == "cuda":
        assert b.gpu is True
    else:
        assert b.gpu is not software_adapter(b.describe())


@pytest.mark.parametrize("adapter, soft", [("llvmpipe (LLVM 19.1.7, 256 bits)", True),
                                           ("lavapipe", True), ("SwiftShader Device (Subzero)", True),
                                           ("NVIDIA H100 80GB HBM3", False), ("AMD Radeon RX 7900", False)])
def test_software_vulkan_adapters_are_not_gpus(adapter: str, soft: bool) -> None:
    assert software_adapter(adapter) is soft


def test_the_device_decides_when_nothing_is_set(session: sk.Session) -> None:
    size = notebook_size(session.backend, environ={}, **SIZES)
    assert size.full is session.backend.gpu
    text = str(size)
    assert session.backend.describe() in text
    if not size.full:   # what it picked, why, and the one line that gives the other size
        assert text.startswith("small size: 32x32, about 5 s")
        assert "FULL_SIZE = True" in text and "SLANG_KERNEL_QUICK=0" in text and "256x256" in text


def test_the_environment_overrides_the_device(cpu_session: sk.Session) -> None:
    b = cpu_session.backend
    assert notebook_size(b, environ={"SLANG_KERNEL_QUICK": "0"}, **SIZES).full is True
    assert notebook_size(b, environ={"SLANG_KERNEL_QUICK": "1"}, **SIZES).full is False
    assert "SLANG_KERNEL_QUICK=0" in str(notebook_size(b, environ={"SLANG_KERNEL_QUICK": "0"}, **SIZES))
    with pytest.raises(ValueError, match="use 1 .* or 0"):
        notebook_size(b, environ={"SLANG_KERNEL_QUICK": "yes"}, **SIZES)


def test_the_notebook_line_overrides_the_environment(cpu_session: sk.Session) -> None:
    size = notebook_size(cpu_session.backend, True, environ={"SLANG_KERNEL_QUICK": "1"}, **SIZES)
    assert size.full and str(size).startswith("full size: 256x256") and "FULL_SIZE = True in the notebook" in str(size)
    assert not notebook_size(cpu_session.backend, False, environ={"SLANG_KERNEL_QUICK": "0"}, **SIZES).full
