"""The percentage bar a local job command draws on a terminal while the job runs."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

__all__ = ["percent_bar"]


@contextlib.contextmanager
def percent_bar(desc: str, quiet: bool) -> Iterator[Callable[[float], None]]:
    """A ``progress(fraction)`` callback that draws a 0–100 % bar on stderr, or does nothing
    with ``quiet`` or when stderr is not a terminal; the bar is closed on leaving."""
    if quiet or not sys.stderr.isatty():
        yield lambda fraction: None
        return
    from tqdm import tqdm

    bar = tqdm(total=100, unit="%", desc=desc, file=sys.stderr, bar_format="{l_bar}{bar}| {elapsed}<{remaining}")

    def progress(fraction: float) -> None:
        bar.n = round(100 * fraction)
        bar.refresh()

    try:
        yield progress
    finally:
        bar.close()
