"""Service benchmarks, one per section (``python3 -m bench.service SECTION --help``)."""

from bench.harness import run_sections

# section → (module of bench.service, what it measures against what)
SECTIONS = {
    "deployments": ("deployments", "concurrent jobs through the embedded and Redis deployments against the bare CLI"),
    "host-cpu": ("host_cpu", "host CPU per subject of uploads, polls, downloads and job bookkeeping"),
    "load": ("load", "many small jobs from concurrent clients: none lost, poll latency, memory"),
}

if __name__ == "__main__":
    run_sections("python3 -m bench.service", __doc__, "bench.service", SECTIONS)
