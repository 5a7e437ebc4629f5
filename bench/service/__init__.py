"""Service benchmarks, one sub-command each: ``python3 -m bench.service SECTION --help``.

The peers are the bare CLI, one process per file (deployments), and the job's own read,
compute and write (host CPU). The figures are in docs/benchmarks.md.
"""
