"""The cubin cache finds what it saved: numba's types of the compiled signature and the
driver's types of the arguments name the same file."""

from types import SimpleNamespace

import numpy as np
from numba import typeof
from numba.core import types

from gpu import cubin_cache, cuda_driver


def _fake_dispatcher(*argument_types):
    library = SimpleNamespace(get_cubin=lambda: SimpleNamespace(code=b"CUBIN" + repr(argument_types).encode()),
                              _entry_name="_Z6kernel")
    return SimpleNamespace(overloads={argument_types: SimpleNamespace(argument_types=argument_types,
                                                                      _codelibrary=library)})


def test_saved_cubins_are_found_by_argument_types(tmp_path, monkeypatch):
    monkeypatch.setenv(cubin_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cuda_driver.driver, "compute_capability", lambda: (9, 0))
    loads = []
    monkeypatch.setattr(cuda_driver, "load_kernel", lambda *a: loads.append(a) or a)
    source = tmp_path / "kernels.py"
    source.write_text("def kernel(): pass\n")
    cache = cubin_cache.CubinCache([source])

    whole = np.zeros((4, 3), np.float32)
    columns = whole[:, 1:]
    view = lambda a: cuda_driver.DeviceArray(None, 1 << 40, a.shape, a.strides, a.dtype)  # noqa: E731
    assert cache.kernel("kernel", (view(whole), 7)) is None
    cache.save("kernel", _fake_dispatcher(typeof(whole), types.int64))
    cache.save("kernel", _fake_dispatcher(typeof(columns), types.int64))

    cubin, entry, signature = cache.kernel("kernel", (view(whole), 7))
    assert (entry, signature) == ("_Z6kernel", ("array(float32, 2d, C)", "int64"))
    assert cubin == b"CUBIN" + repr((typeof(whole), types.int64)).encode()
    assert cache.kernel("kernel", (view(columns), 7))[2] == ("array(float32, 2d, A)", "int64")
    assert cache.kernel("kernel", (view(whole), True)) is None  # another scalar type: another kernel
    cache.kernel("kernel", (view(whole), 7))
    assert len(loads) == 2  # each cubin loaded once per process

    source.write_text("def kernel(): return 1\n")  # an edited kernel finds none of the old cubins
    assert cubin_cache.CubinCache([source]).kernel("kernel", (view(whole), 7)) is None


def test_an_unwritable_cache_costs_speed_not_the_run(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cubin_cache.CACHE_ENV, str(blocker / "kernels"))
    monkeypatch.setattr(cuda_driver.driver, "compute_capability", lambda: (9, 0))
    source = tmp_path / "kernels.py"
    source.write_text("def kernel(): pass\n")
    cache = cubin_cache.CubinCache([source])
    cache.save("kernel", _fake_dispatcher(typeof(np.zeros(3, np.float32)), types.int64))
    assert "cannot save the cubin of kernel" in caplog.text
    assert not list(tmp_path.rglob("*.cubin"))
