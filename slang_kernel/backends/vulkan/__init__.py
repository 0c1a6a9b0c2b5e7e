"""The Vulkan backend: slangpy's sgl device in a worker process or in this one (backend.py); its
registry entry is info.py."""

from .backend import (INSTALL_HINT, IsolatedVulkanBackend, VulkanBackend, VulkanBuffer, VulkanCompileError,
                      VulkanTexture, compile_options, create)

__all__ = ["INSTALL_HINT", "IsolatedVulkanBackend", "VulkanBackend", "VulkanBuffer", "VulkanCompileError",
           "VulkanTexture", "compile_options", "create"]
