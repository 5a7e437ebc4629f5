"""Which CUDA the kernels see: the simulator setting read without importing numba, also
while another thread is still importing it."""

import sys
import types

from gpu.cuda.simulator import simulator_active


def test_simulator_setting_from_numbas_config_or_the_environment(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba.core.config", types.SimpleNamespace(ENABLE_CUDASIM=0))
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert simulator_active() is False  # a loaded config wins: numba may have been configured in code


def test_a_config_module_still_being_imported_defers_to_the_environment(monkeypatch):
    # what sys.modules holds while another thread runs numba/core/config.py: no settings yet
    monkeypatch.setitem(sys.modules, "numba.core.config", types.ModuleType("numba.core.config"))
    for value, expected in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", value)
        assert simulator_active() is expected
