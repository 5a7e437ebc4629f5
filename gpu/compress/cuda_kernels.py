"""The compression family's CUDA kernels (step error, quantisation, chunked rANS), launched
from saved cubins on a GPU and through numba under the CUDA simulator
(:class:`gpu.cuda.family_kernels.KernelFamily`).

An encode's budget search makes about a hundred launches on a sample of half a million
entries, each a few microseconds of GPU work, so the launch's own cost counts: a launch from
the cubin costs a fraction of numba's dispatch of CuPy arrays
(docs/decisions/compress-kernel-launch.md). The TTMc's kernels (:mod:`gpu.compress.backend_cuda`)
run a two-dimensional grid and stay with numba.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from gpu.cuda.family_kernels import KernelFamily
from gpu.cuda.simulator import simulator_active

__all__ = ["KERNELS", "compress_kernels", "launch_view"]

#: kernel name → the module that defines it
_MODULES = {
    "block_sums_kernel": "step_error_cuda",
    "quantize_kernel": "quantize_cuda",
    "dequantize_kernel": "quantize_cuda",
    **{name: "chunked_rans_cuda" for name in ("clipped_histogram_kernel", "quantize_histogram_kernel",
                                              "encode_chunks_kernel", "compact_words_kernel", "move_escapes_kernel",
                                              "lut_kernel", "decode_chunks_kernel", "fill_kernel")},
}


def _dispatcher(name: str):
    """numba's dispatcher of kernel ``name`` (imports numba and compiles or loads it)."""
    return getattr(importlib.import_module(f"gpu.compress.{_MODULES[name]}"), name)


#: The compression kernels, their cubins keyed by this package's sources.
KERNELS = KernelFamily(Path(__file__).parent.glob("*.py"), _dispatcher)


def compress_kernels():
    """The kernels and the arrays they take (:meth:`gpu.cuda.family_kernels.KernelFamily.kernels`)."""
    return KERNELS.kernels(lambda: ("the compression CUDA kernels", None))


def launch_view(array, flat: bool = False):
    """A device array (CuPy's, numba's or ours) as the kernels take it, without a copy: a
    :class:`gpu.cuda.device_arrays.DeviceArray` on a GPU, a numba array under the simulator;
    ``flat``: its C-ordered items in one dimension."""
    if simulator_active():
        from numba import cuda

        view = array if hasattr(array, "copy_to_host") else cuda.as_cuda_array(array)
    else:
        from gpu.cuda.device_arrays import device_view

        view = device_view(array)
    return view.reshape(-1) if flat else view
