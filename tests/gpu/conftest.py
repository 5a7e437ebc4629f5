"""Fixtures of the GPU-family tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu import ahead_of_time


@pytest.fixture
def in_kernels(kernels, monkeypatch) -> Path:
    """This process looks up ahead-of-time builds in ``kernels`` (the kernel cache folder the
    requesting module's ``kernels`` fixture made), read again by each test."""
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(kernels))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    return kernels
