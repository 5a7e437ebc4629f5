"""Numerics and kernels, one subpackage per job family: :mod:`gpu.peaks`, :mod:`gpu.conv`,
:mod:`gpu.compress`; :mod:`gpu.cuda` holds the CUDA layer they share (device and backend choice, the simulator,
the driver path).

No web, queue or file-format code lives here: functions take arrays and return arrays, and
the families never import each other.
"""
