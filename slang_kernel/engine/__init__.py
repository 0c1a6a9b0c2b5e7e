"""The engine: cells and their revisions (cells, cell_store), running a cell and invalidating later ones
(checks), the compile service, kernel builds and specializations (compile_service, kernel_builds,
specialize), the callables they hand out (kernels: ComputeKernel, autodiff: SlangFunction), the
NaN/Inf finder (finite) and the narrow services the callables and views are typed by (protocols).
Session (session.py) is the façade over them; `slang_kernel.Session` and friends are re-exported at the
package root. The engine imports no view (slang_kernel.hooks) and no front end.
"""

__all__: list[str] = []
