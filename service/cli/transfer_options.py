"""``--transfers N``: how many HTTP transfers a service client runs at a time, shared by
``fibertensor submit``/``jobs`` and ``fibertensor bids --server`` without either command
importing the other's module."""

from __future__ import annotations

import argparse

__all__ = ["add_transfers_option"]

# docs/decisions/client-transfers.md
_DEFAULT_TRANSFERS = 4


def _transfer_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1 (1: one after the other)")
    return count


def add_transfers_option(parser: argparse.ArgumentParser, uploads: bool = True, applies: str = "") -> None:
    """``--transfers N`` (``args.transfers``): inputs uploaded (with ``uploads``) and jobs'
    results downloaded at a time; ``applies`` says when, if not always (``"with --server"``)."""
    parser.add_argument(
        "--transfers", type=_transfer_count, default=_DEFAULT_TRANSFERS, metavar="N",
        help=(f"{applies}: " if applies else "") + ("inputs uploaded at a time, and " if uploads else "")
        + "jobs whose results are downloaded at a "
        f"time, each job's as soon as it succeeds while the others still run (default {_DEFAULT_TRANSFERS}; "
        "1: one after the other)",
    )
