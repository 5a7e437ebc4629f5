"""Benchmarks that run ours and the peer on the same data, in one run, side by side.

Each runs from the repository root as ``python3 -m bench.NAME`` (``--help`` lists its
options); :mod:`bench.harness` prints the header, the tables and the JSON lines of all of
them. The figures are in docs/benchmarks.md.
"""
