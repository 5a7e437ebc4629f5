"""The cubin cache finds what it saved: numba's types of the compiled signature and the
driver's types of the arguments name the same file."""

from types import SimpleNamespace

import numpy as np
import pytest
from numba import typeof
from numba.core import types

from gpu.cuda import cache_folder, cubin_cache, kernel_launch
from gpu.cuda.device_arrays import DeviceArray
from gpu.cuda.driver import driver


def _fake_dispatcher(*argument_types):
    library = SimpleNamespace(get_cubin=lambda: SimpleNamespace(code=b"CUBIN" + repr(argument_types).encode()),
                              _entry_name="_Z6kernel")
    return SimpleNamespace(overloads={argument_types: SimpleNamespace(argument_types=argument_types,
                                                                      _codelibrary=library)})


def _view(host: np.ndarray) -> DeviceArray:
    return DeviceArray(None, 1 << 40, host.shape, host.strides, host.dtype)


@pytest.fixture
def gpu_like(tmp_path, monkeypatch):
    """A kernel cache in ``tmp_path``, a compute capability 9.0 device, a numba-cuda whose
    layout the launch packs, and loads recorded instead of made."""
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(tmp_path / "kernels"))
    monkeypatch.setattr(driver, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(kernel_launch, "launch_layout_supported", lambda: True)
    loads = []
    monkeypatch.setattr(kernel_launch, "load_kernel", lambda *a: loads.append(a) or a)
    source = tmp_path / "kernels.py"
    source.write_text("def kernel(): pass\n")
    return source, loads


def test_saved_cubins_are_found_by_argument_types(gpu_like):
    source, loads = gpu_like
    cache = cubin_cache.CubinCache([source])

    whole = np.zeros((4, 3), np.float32)
    columns = whole[:, 1:]
    assert cache.kernel("kernel", (_view(whole), 7)) is None
    cache.save("kernel", _fake_dispatcher(typeof(whole), types.int64))
    cache.save("kernel", _fake_dispatcher(typeof(columns), types.int64))

    cubin, entry, signature = cache.kernel("kernel", (_view(whole), 7))
    assert (entry, signature) == ("_Z6kernel", ("array(float32, 2d, C)", "int64"))
    assert cubin == b"CUBIN" + repr((typeof(whole), types.int64)).encode()
    assert cache.kernel("kernel", (_view(columns), 7))[2] == ("array(float32, 2d, A)", "int64")
    assert cache.kernel("kernel", (_view(whole), True)) is None  # another scalar type: another kernel
    cache.kernel("kernel", (_view(whole), 7))
    assert len(loads) == 2  # each cubin loaded once per process

    source.write_text("def kernel(): return 1\n")  # an edited kernel finds none of the old cubins
    assert cubin_cache.CubinCache([source]).kernel("kernel", (_view(whole), 7)) is None


def test_another_numba_cuda_layout_saves_and_loads_no_cubin(gpu_like, tmp_path, monkeypatch):
    """Outside NUMBA_CUDA_VERSIONS the kernels launch through numba: nothing is written, and
    a cubin saved under a supported release is not loaded."""
    source, loads = gpu_like
    whole = np.zeros((4, 3), np.float32)
    cubin_cache.CubinCache([source]).save("kernel", _fake_dispatcher(typeof(whole), types.int64))
    saved = sorted(p.name for p in tmp_path.rglob("*.cubin"))
    assert len(saved) == 1

    monkeypatch.setattr(kernel_launch, "launch_layout_supported", lambda: False)
    cache = cubin_cache.CubinCache([source])
    assert cache.kernel("kernel", (_view(whole), 7)) is None
    cache.save("kernel", _fake_dispatcher(typeof(whole[:, 1:]), types.int64))
    assert sorted(p.name for p in tmp_path.rglob("*.cubin")) == saved
    assert loads == []


def test_an_unwritable_cache_costs_speed_not_the_run(gpu_like, tmp_path, monkeypatch, caplog):
    source, _ = gpu_like
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(blocker / "kernels"))
    cache = cubin_cache.CubinCache([source])
    cache.save("kernel", _fake_dispatcher(typeof(np.zeros(3, np.float32)), types.int64))
    assert "cannot save the cubin of kernel" in caplog.text
    assert not list(tmp_path.rglob("*.cubin"))
