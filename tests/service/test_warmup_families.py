"""``fibertensor warmup --family fod fixels``: the CSD, MSMT-CSD and FMLS CPU loops go into
numba's on-disk cache (the session's cache: tests/conftest.py), several families in one call."""

import os
from pathlib import Path

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
    CUDA warm-up compiles those loops too, so no job of a warmed worker compiles them."""
    from gpu.fixels import warmup as fixels_warmup
    from gpu.fod import warmup as fod_warmup

    calls = []
    monkeypatch.setattr(fod_warmup, "msmt_csd", lambda *a, backend: calls.append(("msmt_csd", backend)))
    monkeypatch.setattr(fod_warmup, "csd", lambda *a, backend: calls.append(("csd", backend)))
    monkeypatch.setattr(fixels_warmup, "segment_fods", lambda sh, backend: calls.append(("fmls", backend)))
    fod_warmup.warm_up_fod("cuda")
    fixels_warmup.warm_up_fixels("cuda")
    assert sorted(set(calls)) == [("csd", "cuda"), ("fmls", "cpu"), ("fmls", "cuda"), ("msmt_csd", "cpu"),
                                  ("msmt_csd", "cuda")]
    calls.clear()
    fod_warmup.warm_up_fod("cpu")
    fixels_warmup.warm_up_fixels("cpu")
    assert {backend for _, backend in calls} == {"cpu"}


def test_warmup_caches_the_compress_loops(capsys):
    """``--family compress``: the chunked rANS and step-error loops go into numba's cache."""
    assert main(["warmup", "--backend", "cpu", "--family", "compress"]) == 0
    assert "compress: chunked rANS and step-error loops (cpu)" in capsys.readouterr().out
    cache = Path(os.environ["NUMBA_CACHE_DIR"])
    for loop in ("chunked_rans._encode_chunks", "chunked_rans._decode_chunks", "step_error._block_sums"):
        assert list(cache.rglob(f"{loop}-*.nbi")), loop
