"""A family's kernels: launched from a cubin where one is cached, else through numba once
(announced where it compiles, its cubin saved then); and the launching modules of the CUDA
families import no numba until a kernel needs it (tests/gpu/*/test_cubin_path.py run both
paths on a GPU)."""

import os
import subprocess
import sys

import pytest

from gpu.cuda import compile_notice
from gpu.cuda.family_kernels import CachedKernel


class _Launches:
    """A kernel or dispatcher that records its launches."""

    def __init__(self) -> None:
        self.launches = []

    def __getitem__(self, config):
        return lambda *args: self.launches.append((config, args))


class _Cubins:
    def __init__(self, kernel) -> None:
        self._kernel, self.saved = kernel, []

    def kernel(self, name, args):
        return self._kernel

    def save(self, name, dispatcher):
        self.saved.append((name, dispatcher))


def _unused(*args):
    raise AssertionError("numba was asked for a kernel whose cubin is cached")


def test_a_cached_cubin_is_launched_with_the_whole_configuration():
    kernel = _Launches()
    cubins = _Cubins(kernel)
    CachedKernel(cubins, "msmt_kernel", _unused, _unused)[7, 32, 0, 4096](1, 2.5)
    assert kernel.launches == [((7, 32, 0, 4096), (1, 2.5))] and cubins.saved == []


@pytest.mark.parametrize("compiled", [True, False])
def test_without_a_cubin_numba_launches_announces_a_compile_and_the_cubin_is_saved(compiled, monkeypatch):
    dispatcher, cubins, announced = _Launches(), _Cubins(None), []
    monkeypatch.setattr(compile_notice, "is_compiled", lambda d, args: compiled)
    monkeypatch.setattr(compile_notice, "announce_compile", lambda what, seconds: announced.append((what, seconds)))
    lookup = {"csd_kernel": dispatcher}.__getitem__
    CachedKernel(cubins, "csd_kernel", lookup, lambda: ("the CSD CUDA kernel", None))[3, 32, 0, 512](4)
    assert dispatcher.launches == [((3, 32, 0, 512), (4,))]
    assert cubins.saved == [("csd_kernel", dispatcher)]
    assert announced == ([] if compiled else [("the CSD CUDA kernel", None)])


@pytest.mark.parametrize("module", ["gpu.peaks.backend_cuda", "gpu.fod.backend_cuda", "gpu.fixels.backend_cuda"])
def test_a_cuda_backend_imports_no_numba_off_the_simulator(module):
    """Its kernels' module (which compiles through numba) is imported only when numba launches."""
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'numba'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"})
    assert done.stdout.strip() == "[]"


def test_a_stream_of_the_driver_binding_reaches_numba_as_its_handle(monkeypatch):
    """A kernel without a cubin, launched on a stream of gpu.cuda.device_arrays, runs through
    numba on numba's stream of the same handle: after the copies queued there before it."""
    import ctypes

    from numba import cuda

    from gpu.cuda.device_arrays import Stream

    class Unowned(Stream):  # only its handle is read; the driver never made it, so it is not destroyed
        def __del__(self) -> None:
            pass

    monkeypatch.setattr(cuda, "external_stream", lambda handle: ("numba stream", handle), raising=False)
    stream = Unowned.__new__(Unowned)
    stream.handle = ctypes.c_void_p(0x1234)
    dispatcher = _Launches()
    CachedKernel(_Cubins(None), "fmls_grow_cuda", {"fmls_grow_cuda": dispatcher}.__getitem__,
                 lambda: ("the FMLS CUDA kernels", None))[5, 64, stream](1)
    assert dispatcher.launches == [((5, 64, ("numba stream", 0x1234)), (1,))]
