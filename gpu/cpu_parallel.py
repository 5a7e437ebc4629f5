"""One numba parallel region at a time in a process.

Each CPU backend's ``prange`` loop already runs on every numba thread, so two jobs' loops
gain nothing by running at the same moment; and numba's threading layers are not reliably
safe for parallel regions launched from several Python threads at once, above all on the
first call that compiles or loads a loop (two peaks jobs prepared in threads segfaulted
there, cold cache; numba issues #10563 and #10614 show the same in numba's own
concurrency tests). Callers hold :data:`parallel_region` around each parallel call.
"""

from __future__ import annotations

import threading

__all__ = ["parallel_region"]

parallel_region = threading.Lock()
