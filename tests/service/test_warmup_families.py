"""``fibertensor warmup --family fod fixels``: the CSD, MSMT-CSD and FMLS CPU loops go into
numba's on-disk cache (the session's cache: tests/conftest.py), several families in one call."""

import os
from pathlib import Path

import numpy as np

from service.cli import main


def test_warmup_caches_the_fod_and_fixels_loops(capsys):
    # no ahead-of-time build: the session's other tests run numba's loops (tests/gpu/fod/test_ahead_of_time.py)
    assert main(["warmup", "--backend", "cpu", "--family", "fod", "fixels", "--no-ahead-of-time"]) == 0
    out = capsys.readouterr().out
    assert "fod: CSD and MSMT-CSD (cpu)" in out and "fixels: FMLS segmentation (cpu)" in out
    assert "peaks lmax" not in out and "ahead-of-time build" not in out  # only what was asked for
    cache = Path(os.environ["NUMBA_CACHE_DIR"])
    for loop in ("cpu_loops.msmt_loop", "cpu_loops.csd_loop", "cpu_loops.segment_loop"):
        assert list(cache.rglob(f"{loop}-*.nbi")), loop


def test_cuda_warmup_also_loads_the_cpu_loops_the_cuda_backends_hand_voxels_to(monkeypatch):
    """A CUDA batch solves on the CPU the MSMT-CSD voxels whose active set outgrows the
    kernel's, and segments there the voxels with more fixels than the first pass holds: a
    CUDA warm-up compiles those loops too, so no job of a warmed worker compiles them; and
    response estimation's tensor fit kernel, for the float32 signals jobs read, gathered a
    volume at a time (a NIfTI's) and voxel-major (a volume-fastest .mif's)."""
    from gpu.fixels import warmup as fixels_warmup
    from gpu.fod import warmup as fod_warmup

    calls = []
    monkeypatch.setattr(fod_warmup, "msmt_csd", lambda *a, backend: calls.append(("msmt_csd", backend)))
    monkeypatch.setattr(fod_warmup, "csd", lambda *a, backend: calls.append(("csd", backend)))
    monkeypatch.setattr(fixels_warmup, "segment_fods", lambda sh, backend: calls.append(("fmls", backend)))
    monkeypatch.setattr(fod_warmup, "tensor_fa_and_direction",
                        lambda signals, scheme, backend: calls.append(("tensor fit", backend, signals.dtype,
                                                                                   signals.flags.f_contiguous)))
    fod_warmup.warm_up_fod("cuda")
    fixels_warmup.warm_up_fixels("cuda")
    assert sorted(set(calls)) == [("csd", "cuda"), ("fmls", "cpu"), ("fmls", "cuda"), ("msmt_csd", "cpu"),
                                  ("msmt_csd", "cuda"), ("tensor fit", "cuda", np.float32, False),
                                  ("tensor fit", "cuda", np.float32, True)]
    calls.clear()
    fod_warmup.warm_up_fod("cpu")
    fixels_warmup.warm_up_fixels("cpu")
    assert {backend for _, backend in calls} == {"cpu"}


def test_warmup_caches_the_compress_loops(capsys):
    """``--family compress``: the chunked rANS, step-error and quantiser loops go into numba's cache."""
    assert main(["warmup", "--backend", "cpu", "--family", "compress"]) == 0
    assert "compress: chunked rANS, step-error and quantiser loops (cpu)" in capsys.readouterr().out
    cache = Path(os.environ["NUMBA_CACHE_DIR"])
    for loop in ("chunked_rans._encode_chunks", "chunked_rans._decode_chunks", "step_error._block_sums",
                 "quantize._quantize_blocks"):
        assert list(cache.rglob(f"{loop}-*.nbi")), loop


def test_warmup_pieces_spread_peaks_by_lmax_and_the_cuda_conv_kernels_by_share():
    """The pieces processes take at once: a peaks lmax each, the peaks writers (whose build
    waits for them), each family, and conv's CUDA kernels in as many shares as processes;
    fod brings fixels (a fod job without responses estimates them with fod2fixel's lobes)."""
    from service.cli.warmup import _units

    units = _units(("peaks", "conv", "fod"), "cuda", (4, 8), True, 3)
    assert [name for name, _ in units] == ["peaks", "peaks", "peaks writers", "conv", "conv", "conv", "fod",
                                        "fixels"]
    assert [options["lmax"] for name, options in units if name == "peaks"] == [4, 8]
    assert [(options["part"], options["parts"]) for name, options in units if name == "conv"] == [(0, 3), (1, 3),
                                                                                                  (2, 3)]
    assert _units(("conv",), "cpu", (), False, 3) == [("conv", {"part": 0, "parts": 1})]  # the CPU loops: one piece
    assert [name for name, _ in _units(("fixels", "fod"), "cpu", (), False, 1)] == ["fixels", "fod"]


def test_warmup_in_one_process_prints_what_several_print(capsys):
    """``--processes 1`` runs every piece here, one after another; the default spreads them
    over processes: the same lines either way, in the same order (times aside)."""
    import re

    lines = []
    for processes in ("1", "2"):
        assert main(["warmup", "--backend", "cpu", "--family", "fod", "compress", "--no-ahead-of-time",
                     "--processes", processes]) == 0
        lines.append([re.sub(r"[0-9.]+ s$", "", line) for line in capsys.readouterr().out.splitlines()])
    assert lines[0] == lines[1]
    assert lines[0][0] == "fod: CSD and MSMT-CSD (cpu): "
    assert lines[0][1] == "compress: chunked rANS, step-error and quantiser loops (cpu): "
    assert lines[0][2].startswith("fixels: ")


def test_warmup_refuses_fewer_than_one_process(capsys):
    assert main(["warmup", "--backend", "cpu", "--family", "fod", "--processes", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("--processes must be at least 1, got 0")
