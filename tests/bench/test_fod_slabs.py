"""``python3 -m bench.fod --slabs``: each round times both fits as fresh processes and finds
the same WM FOD bytes."""

from __future__ import annotations

import numpy as np

from bench.fod import add_arguments, ellipsoid_mask, slab_fit
from bench.harness import bench_parser
from gpu.fod import shell_scheme, tissue_responses


class _Tables:
    def __init__(self):
        self.rows = []

    def table(self, title, rows, columns, note=""):
        self.rows += rows


def test_slab_rows_time_both_fits_and_compare_their_bytes(tmp_path):
    parser = bench_parser("fod")
    add_arguments(parser)
    args = parser.parse_args(["--slabs", "--repeats", "1", "--workdir", str(tmp_path)])
    shape = (12, 12, 6)
    bvals, bvecs = shell_scheme(2, ((1000.0, 20), (2000.0, 30)))
    tables = _Tables()
    slab_fit(args, tables, shape, bvals, bvecs, ellipsoid_mask(shape), tissue_responses([0.0, 1000.0, 2000.0]), "cpu")
    assert [(row["mode"], row["round"]) for row in tables.rows] == [("slabs", 1), ("whole", 1)]
    assert all(row["same"] == "yes" and row["rss"] > 0 and 0 < row["fit"] < row["wall"] for row in tables.rows)
    assert np.isfinite([row["read"] for row in tables.rows]).all()
