"""The job store at cohort scale: what listing a batch and a janitor sweep cost with many
finished jobs on the data volume.

Writes ``--jobs`` finished peaks job records (``job.json`` only, as the API and a worker
leave them; ``--labels`` batches, interleaved) into a fresh store, then times, in this
process, each the first time (every record parsed) and again (records cached): paging
through one batch's listing as ``GET /v1/jobs?label=`` serves it (1,000 a page), the
janitor's sweep for orphaned jobs, and its scan for jobs past ``FIBERTENSOR_RESULTS_TTL_HOURS``;
last, the paging with the folder listed again for every page, as before the store reused
its listing (the peer).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import worker.job_store as job_store
from bench.harness import Column, Report, bench_parser, ratio
from worker.job_runner import reap_orphans
from worker.job_store import JobRecord, JobStatus, JobStore, new_job_id, utc_now


def write_store(folder: Path, jobs: int, labels: int) -> JobStore:
    store = JobStore(folder)
    for number in range(jobs):
        job_id = new_job_id()
        record = JobRecord(id=job_id, kind="peaks", tenant="lab", label=f"cohort-{number % labels}",
                           status=JobStatus.succeeded, created_at=utc_now(), finished_at=utc_now(),
                           params={"npeaks": 3}, inputs={"fod": "fod.nii"})
        (store.jobs_dir / job_id).mkdir()
        (store.jobs_dir / job_id / "job.json").write_bytes(record.model_dump_json(indent=1).encode())
    return store


def page_through(store: JobStore, label: str) -> tuple[int, int]:
    """Jobs and pages of ``label``'s listing, 1,000 a page, as the API serves it."""
    count = pages = 0
    cursor = None
    while True:
        page, cursor = store.list(tenant="lab", label=label, limit=1000, cursor=cursor)
        count, pages = count + len(page), pages + 1
        if cursor is None:
            return count, pages


def main() -> None:
    parser = bench_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--labels", type=int, default=4)
    parser.add_argument("--work", type=Path, help="folder for the store (default: a new temporary one)")
    args = parser.parse_args()
    report = Report(args.json)
    work = args.work or Path(tempfile.mkdtemp(prefix="fibertensor-store-bench-"))
    started = time.perf_counter()
    store = write_store(work / "data", args.jobs, args.labels)
    report.progress(f"{args.jobs} finished jobs in {args.labels} batches written in "
                    f"{time.perf_counter() - started:.1f} s")
    steps = {
        "list one batch, 1,000 a page": lambda store: page_through(store, "cohort-0"),
        "janitor sweep for orphaned jobs": lambda store: reap_orphans(store, lambda job_id: None,
                                                                       heartbeat_timeout=120.0, max_worker_losses=3),
        "scan for jobs past the results TTL (none)": lambda store: store.expire_finished(older_than=1e9),
    }
    rows = []
    for name, step in steps.items():
        store = JobStore(work / "data")  # as a fresh API process: nothing parsed yet
        for attempt in ("first, every record parsed", "again, records cached"):
            started = time.perf_counter()
            step(store)
            rows.append((f"{name}, {attempt}", time.perf_counter() - started))
    # the listing as it was before JobStore reused it between pages: jobs/ listed every page
    fresh_seconds, job_store._IDS_FRESH_SECONDS = job_store._IDS_FRESH_SECONDS, 0.0
    started = time.perf_counter()
    steps["list one batch, 1,000 a page"](store)
    rows.append(("list one batch, records cached, jobs/ listed for every page", time.perf_counter() - started))
    job_store._IDS_FRESH_SECONDS = fresh_seconds
    cached = next(seconds for name, seconds in rows if name == "list one batch, 1,000 a page, again, records cached")
    report.table(f"{args.jobs} jobs, {args.labels} batches (seconds)",
                 [{"step": name, "seconds": seconds} for name, seconds in rows[:-1]]
                 + [{"step": rows[-1][0], "seconds": rows[-1][1], "x_ours": ratio(rows[-1][1], cached)}],
                 [Column("step", "step"), Column("seconds", "s", ".3f"), Column("x_ours", "x cached listing", ".1f")],
                 note="x cached listing: the listing as before over the one that reuses the folder's listing")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
