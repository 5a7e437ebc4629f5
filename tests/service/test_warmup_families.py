"""``fibertensor warmup --family fod fixels``: the CSD, MSMT-CSD and FMLS CPU loops go into
numba's on-disk cache (the session's cache: tests/conftest.py), several families in one call."""

import os
from pathlib import Path

from service.cli import main


def test_warmup_caches_the_fod_and_fixels_loops(capsys):
    assert main(["warmup", "--backend", "cpu", "--family", "fod", "fixels"]) == 0
    out = capsys.readouterr().out
    assert "fod: CSD and MSMT-CSD (cpu)" in out and "fixels: FMLS segmentation (cpu)" in out
    assert "peaks lmax" not in out  # only the families asked for
    cache = Path(os.environ["NUMBA_CACHE_DIR"])
    for loop in ("backend_cpu._msmt_loop", "backend_cpu._csd_loop", "fmls._segment_loop"):
        assert list(cache.rglob(f"{loop}-*.nbi")), loop
