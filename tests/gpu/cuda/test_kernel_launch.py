"""The cubin launch's pure-Python half against numba, which owns the kernel ABI: how an
argument is typed (which compiled kernel it picks), how it is flattened into parameters, and
the numba-cuda releases whose layout it packs."""

import json
import os
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from numba import typeof
from numba.core import types
from numba.core.datamodel import default_manager
from numba.core.registry import cpu_target

from gpu.cuda import kernel_launch
from gpu.cuda.cubin_cache import _signature_name
from gpu.cuda.device_arrays import DeviceArray
from gpu.cuda.kernel_launch import (
    NUMBA_CUDA_VERSIONS, UnsupportedNumbaCuda, argument_type, numba_cuda_specifier, parameter_formats,
    parameter_values,
)

ROOT = Path(__file__).resolve().parents[3]


def _device_view(host: np.ndarray, ptr: int = 1 << 40) -> DeviceArray:
    """A DeviceArray with ``host``'s shape, strides and dtype (no device memory: only typed)."""
    return DeviceArray(None, ptr, host.shape, host.strides, host.dtype)


BASE = np.zeros((6, 5, 4), np.float32)
VIEWS = [BASE, BASE[1:3], BASE[:, 1:3], BASE[:, :, 1:2], BASE[:1], BASE[2:3, :, :], np.zeros(7, np.int32)[2:5],
         np.zeros((1, 1), np.uint8), np.zeros((3, 1), np.int32), np.zeros((0, 4), np.float32)]


@pytest.mark.parametrize("host", VIEWS, ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_arrays_are_typed_as_numba_types_them(host):
    assert argument_type(_device_view(host)) == _signature_name(typeof(host))


@pytest.mark.parametrize("value, numba_type", [(5, "int64"), (True, "bool"), (np.int32(3), "int32"),
                                               (np.float32(1.5), "float32"), (2.5, "float64")])
def test_scalars_are_typed_as_numba_types_them(value, numba_type):
    assert argument_type(value) == numba_type == str(typeof(value))


def _data_sizes(formats: list[str]) -> list[int]:
    """Bytes of each parameter's value in its slot (padding left out)."""
    return [struct.calcsize("<" + f.replace("4x", "").replace("7x", "")) for f in formats]


def test_parameters_flatten_as_numba_lowers_kernel_arguments():
    """Every numba argument type becomes the same number of parameters, of the same sizes,
    as numba's argument packer makes of it (our slots are 8 bytes, scalars padded), and an
    array's parameters are its data model's fields in their order."""
    argtypes = [typeof(BASE), typeof(BASE[:, 1:3]), types.int64, typeof(np.zeros(3, np.uint8)), types.boolean,
                types.float32, types.int32]
    target = cpu_target.target_context
    lowered = target.get_arg_packer(argtypes).argument_types
    formats = parameter_formats([_signature_name(t) for t in argtypes])
    assert all(struct.calcsize("<" + f) == 8 for f in formats)
    assert _data_sizes(formats) == [target.get_abi_sizeof(t) for t in lowered]
    assert default_manager.lookup(typeof(BASE))._fields == ("meminfo", "parent", "nitems", "itemsize", "data", "shape",
                                                            "strides")


# numba's own packing of kernel arguments (dispatcher._Kernel._prepare_args) on stand-ins for
# its device arrays; run outside the simulator, whose numba.cuda has no dispatcher. Prints
# each parameter as [value, bytes] (bytes null where numba passes a plain Python value).
_NUMBA_PACKING = r"""
import ctypes, json, sys
from types import SimpleNamespace
import numpy as np
import numba.cuda.dispatcher as d

class DevArray:  # the attributes _prepare_args reads of numba's DeviceNDArray, across releases
    def __init__(self, ptr, shape, strides, dtype):
        self.ptr, self.shape, self.strides, self.dtype = ptr, tuple(shape), tuple(strides), np.dtype(dtype)
        self.size, self.ndim = int(np.prod(shape)), len(shape)
        self._layout = SimpleNamespace(strides_in_bytes=self.strides)

d.wrap_arg = lambda value: SimpleNamespace(to_device=lambda retr, stream: value)
if hasattr(d, "driver"):
    d.driver = SimpleNamespace(device_pointer=lambda a: a.ptr, USE_NV_BINDING=False)
T = d.types
kinds = {"float32": T.float32, "int32": T.int32, "int64": T.int64, "uint32": T.uint32, "float64": T.float64,
         "bool": T.boolean}
kernel = SimpleNamespace(extensions=[])
out = []
for arg in json.loads(sys.argv[1]):
    if arg[0] == "array":
        _, dtype, layout, ptr, shape, strides = arg
        ty, value = T.Array(kinds[dtype], len(shape), layout), DevArray(ptr, shape, strides, dtype)
    else:
        ty, value = kinds[arg[0]], arg[1]
    packed = []
    d._Kernel._prepare_args(kernel, ty, value, 0, [], packed)
    for p in packed:
        if isinstance(p, ctypes._SimpleCData):
            out.append([p.value or 0, ctypes.sizeof(p)])
        else:
            out.append([p, None])
print(json.dumps(out))
"""


def test_parameters_are_what_numbas_own_launch_packs():
    """Array fields (meminfo, parent, nitems, itemsize, data, shape, strides) and scalars,
    value by value, against numba's ``_prepare_args`` (numba-cuda's where it is installed)."""
    arrays = [BASE[:, 1:3], np.zeros(7, np.int32)[2:5], np.zeros((3, 4), np.float64).T]
    args = [_device_view(a, ptr=(1 << 40) + 4096 * i) for i, a in enumerate(arrays)]
    args[1:1] = [7, np.int32(-3), np.uint32(9), np.float32(1.5), 2.5, True]
    signature = [argument_type(a) for a in args]
    described = []
    for kind, value in zip(signature, args):
        if kind.startswith("array("):
            described.append(["array", value.dtype.name, value.numba_layout, value.ptr, value.shape, value.strides])
        else:
            described.append([kind, value.item() if isinstance(value, np.generic) else value])
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _NUMBA_PACKING, json.dumps(described)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=300)
    if run.returncode and "No module named 'numba.cuda" in run.stderr:
        pytest.skip("this numba has no CUDA target to compare with (install numba-cuda)")
    assert run.returncode == 0, run.stderr
    numbas = json.loads(run.stdout)

    formats = parameter_formats(signature)
    ours = parameter_values(signature, args)
    assert len(numbas) == len(ours) == len(formats)
    for (value, size), mine, fmt, data in zip(numbas, ours, formats, _data_sizes(formats)):
        assert value == (float(mine) if fmt.startswith(("f", "d")) else int(mine))
        assert size in (None, data)
    packed = struct.unpack("<" + "".join(formats), struct.pack("<" + "".join(formats), *ours))
    assert list(packed) == ours  # every value survives its slot


@pytest.mark.parametrize("version, supported", [("0.30.4", True), ("0.4.0", True), ("0.20.1", True),
                                                ("0.3.0", False), ("0.31.0", False), ("1.0.0", False),
                                                (None, False)])
def test_the_launch_runs_only_with_the_numba_cuda_releases_it_packs_for(version, supported, monkeypatch):
    monkeypatch.setattr(kernel_launch, "_installed_numba_cuda", lambda: version)
    kernel_launch.launch_layout_supported.cache_clear()
    try:
        assert kernel_launch.launch_layout_supported() is supported
        if not supported:
            with pytest.raises(UnsupportedNumbaCuda, match=r"install numba-cuda>=0\.4,<0\.31"):
                kernel_launch.load_kernel(b"", "kernel", ())
    finally:
        kernel_launch.launch_layout_supported.cache_clear()


def test_pyproject_pins_the_numba_cuda_releases_the_launch_packs_for():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cuda"]
    pins = [r.replace(" ", "") for r in extra if r.startswith("numba-cuda")]
    assert pins == ["numba-cuda" + numba_cuda_specifier()]
    assert numba_cuda_specifier() == ">=0.4,<0.31" and NUMBA_CUDA_VERSIONS == ((0, 4), (0, 31))


def test_slices_are_views_with_numpys_offsets():
    host = np.zeros((6, 5, 4), np.float32)
    view = _device_view(host)
    for index in [(slice(1, 3),), (slice(None), slice(2, 5)), (slice(4, 9), slice(0, 1), slice(1, 3))]:
        part = view[index]
        expected = host[index]
        offset = expected.__array_interface__["data"][0] - host.__array_interface__["data"][0]
        assert (part.shape, part.strides, part.ptr - view.ptr) == (expected.shape, expected.strides, offset)


def test_transposes_and_their_slices_are_typed_as_numba_types_numpys():
    """A C array's transpose (how to_device keeps a Fortran-ordered host array) and slices of
    it: numpy's shapes and strides, and the layout numba gives the same numpy views."""
    host = np.zeros((6, 5), np.float32)
    view = _device_view(host).T
    for index, expected in [((), host.T), ((slice(None), slice(1, 4)), host.T[:, 1:4]), ((slice(2, 4),), host.T[2:4])]:
        part = view[index] if index else view
        assert (part.shape, part.strides) == (expected.shape, expected.strides)
        assert argument_type(part) == _signature_name(typeof(expected))


@pytest.mark.parametrize("config, expected", [((4, 32), (4, 32, None, 0)), ((4, 32, 0), (4, 32, None, 0)),
                                              ((np.int64(4), 32, 0, 1024), (4, 32, None, 1024))])
def test_a_launch_takes_numbas_configurations(config, expected):
    """grid, block, then the stream (0: the legacy default) and dynamic shared memory bytes."""
    import ctypes

    kernel = kernel_launch.Kernel(ctypes.c_void_p(), ctypes.c_void_p(), ["int64"])
    assert kernel[config].args == expected
