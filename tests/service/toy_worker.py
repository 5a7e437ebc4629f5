"""Entry point of the worker subprocesses tests start: ``fibertensor worker`` with the test
job kind registered next to the real ones (a module-level registry patch, inherited by the
prefork pool)."""

from __future__ import annotations

import sys

import worker.job_kinds as job_kinds_module
from service.cli import server
from tests.service.toy_kind import register_toy_kind

if __name__ == "__main__":
    job_kinds_module._FAMILY_MODULES = register_toy_kind(job_kinds_module)
    import argparse

    parser = argparse.ArgumentParser(prog="toy_worker")
    sub = parser.add_subparsers()
    server.register(sub)
    args = parser.parse_args(["worker", *sys.argv[1:]])
    sys.exit(args.func(args))
