"""Fiber-peaks benchmarks, one sub-command each: ``python3 -m bench.peaks SECTION --help``.

The peers are MRtrix3 ``sh2peaks`` and DIPY ``peak_directions`` (kernels, noisy FODs,
whole processes), the job's own earlier ways of reading and the baseline outputs (read
path, outputs, transfers). The figures are in docs/benchmarks.md.
"""
