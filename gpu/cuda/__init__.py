"""The CUDA layer every family shares: which device and backend run, and the driver path.

- :mod:`gpu.cuda.simulator`: whether numba's CUDA simulator stands in for a GPU.
- :mod:`gpu.cuda.driver`: libcuda through ctypes, the primary context.
- :mod:`gpu.cuda.device`: is a GPU usable, its name, its context started early.
- :mod:`gpu.cuda.backend`: ``auto|cpu|cuda`` resolved.
- :mod:`gpu.cuda.host_memory`, :mod:`gpu.cuda.device_arrays`: page-locked host blocks,
  device arrays, copies and events without numba.
- :mod:`gpu.cuda.kernel_launch`, :mod:`gpu.cuda.cubin_cache`: cubins numba built, saved
  and launched without numba (docs/decisions/cubin-driver-path.md).
- :mod:`gpu.cuda.family_kernels`: a family's kernels and arrays, from its cubins on a GPU,
  through numba under the simulator.
- :mod:`gpu.cuda.cache_folder`: the kernel cache folder.
- :mod:`gpu.cuda.compile_notice`: will a numba call compile, and the first-use notice.

Every module here is light (no numba at import). Import names from the module that defines
them; this package's ``__init__`` imports nothing and exports nothing.
"""

__all__: list[str] = []
