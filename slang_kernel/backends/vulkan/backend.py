"""Vulkan backend: slangpy's sgl device, in a worker process of its own (the default) or in this one.

A shader that crashes the driver (lavapipe runs shaders as CPU code in the process that made the
device) costs one cell's KernelCrash when the device lives in a worker (`isolated`), and the
worker restarts; Session(isolate=False) keeps the device here (`device`): a few microseconds
less per dispatch and raw sgl objects as parameters, but a crashing shader takes the notebook down.
"""

from __future__ import annotations

from .. import BackendConfig
from .device import INSTALL_HINT, VulkanBackend, VulkanBuffer, VulkanCompileError, VulkanTexture, compile_options
from .isolated import IsolatedVulkanBackend

__all__ = ["INSTALL_HINT", "IsolatedVulkanBackend", "VulkanBackend", "VulkanBuffer", "VulkanCompileError",
           "VulkanTexture", "compile_options", "create"]


def create(config: BackendConfig) -> VulkanBackend | IsolatedVulkanBackend:
    """The device in a worker process (config.isolate, the default), or in this one."""
    return IsolatedVulkanBackend(config) if config.isolate else VulkanBackend(config)
