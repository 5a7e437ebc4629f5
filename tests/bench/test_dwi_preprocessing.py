"""``python3 -m bench.dwi_preprocessing``: both steps timed beside their MRtrix3 peers, with
the mask and the normalised WM FOD found equal to theirs."""

from __future__ import annotations

import pytest

from bench.dwi_preprocessing import add_arguments, run
from bench.harness import bench_parser

pytestmark = pytest.mark.requires_mrtrix


class _Tables:
    def __init__(self):
        self.rows = []

    def table(self, title, rows, columns, note=""):
        self.rows += rows


def test_rows_time_ours_and_the_peer_and_agree():
    parser = bench_parser("dwi_preprocessing")
    add_arguments(parser)
    tables = _Tables()
    run(parser.parse_args(["--shape", "20", "20", "12", "--repeats", "1", "--nthreads", "1"]), tables)
    assert [row["peer"] for row in tables.rows] == ["dwi2mask", "mtnormalise"]
    assert all(row["peer_s"] > 0 and row["ours_s"] > 0 and row["ratio"] > 0 for row in tables.rows)
    assert tables.rows[0]["agreement"].startswith("0 of ")
    assert float(tables.rows[1]["agreement"].split()[4]) <= 1e-5  # "WM FOD values within X of the largest"
