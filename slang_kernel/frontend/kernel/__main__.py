"""`python -m slang_kernel.frontend.kernel -f CONNECTION_FILE`: start the Slang kernel (what kernel.json runs)."""

from ipykernel.kernelapp import IPKernelApp

from .kernel import SlangKernel

if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=SlangKernel)
