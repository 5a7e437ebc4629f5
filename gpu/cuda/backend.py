"""Which backend runs a family's numerics: ``auto``, ``cpu`` or ``cuda``, resolved."""

from __future__ import annotations

from gpu.cuda import device, simulator

__all__ = ["resolve_backend"]


def resolve_backend(backend: str) -> str:
    """Map ``auto|cpu|cuda`` to the backend that will run.

    ``auto`` picks CUDA when a real GPU is present, else CPU. ``cuda`` without a GPU is an
    error unless the simulator is active (tests run the kernels there).
    """
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend must be auto, cpu or cuda, not {backend!r}")
    if backend == "auto":
        return "cuda" if device.cuda_available() else "cpu"
    if backend == "cuda" and not (device.cuda_available() or simulator.simulator_active()):
        raise RuntimeError(
            "backend 'cuda' was requested but no CUDA GPU is usable here "
            "(install numba-cuda and an NVIDIA driver, or use --backend cpu)"
        )
    return backend
