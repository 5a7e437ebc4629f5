"""Job folders on the data volume: the source of truth for every job.

One folder per job under ``<data_dir>/jobs/<id>/``::

    job.json      the job record (status, progress, params, results), replaced atomically
    job.lock      flock target serialising read-modify-write of job.json across processes
    heartbeat     touched by the running job; its mtime tells whether the runner is alive
    cancel        present once cancellation was requested
    inputs/       uploaded files, named after their input slot (a .nii.gz kept inflated, as .nii)
    outputs/      results, renamed into place from ``outputs.partial-N`` when a run finishes
    log.txt       what the job reported while running

Uploads are assembled in ``<data_dir>/staging/<id>/`` (same file system) and renamed into
``jobs/`` in one step, so a job either exists completely or not at all. The process
receiving an upload holds the lock on its staging folder's ``job.lock``, so a folder nobody
holds is a leftover, whichever way its cleanup failed, and the API's janitor
removes it (:meth:`JobStore.sweep_staging`). The queue carries only job ids; a worker reads
everything else from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, Field

from worker.io.atomic import write_bytes_atomic
from worker.job_kinds import UploadedInput

__all__ = [
    "JobStatus",
    "TERMINAL_STATUSES",
    "JobError",
    "ResultFile",
    "JobRecord",
    "JobNotFound",
    "InvalidCursor",
    "JobStore",
    "new_job_id",
    "input_name",
    "with_input_names",
    "utc_now",
]

logger = logging.getLogger(__name__)

_ID_HEX = 28
_PARSED_CACHE_SIZE = 100_000
# How long a listing of jobs/ is reused while the folder looks unchanged: a client paging
# through a large batch asks for a page after the other, each a walk from the newest job
# (docs/decisions/job-listing-cache.md).
_IDS_FRESH_SECONDS = 1.0
# An absolute path of three or more parts, not a URL's nor one of the API's routes (/v1/...):
# what is left of one after the data volume's own folders are cut from a message.
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?!v1/)(?:[^\s/'\"]+/){2,}([^\s/'\"]+)")
_MAX_NAME_CHARS = 255
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class JobStatus(str, Enum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


TERMINAL_STATUSES = frozenset({JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled})


class JobError(BaseModel):
    title: str
    detail: str


class ResultFile(BaseModel):
    name: str
    bytes: int
    sha256: str


class JobRecord(BaseModel):
    """The content of ``job.json``."""

    id: str
    kind: str
    tenant: str
    label: str | None = None
    status: JobStatus = JobStatus.queued
    progress: float = 0.0
    created_at: datetime
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    #: stored input file names by slot (``fod.nii`` for an upload kept inflated)
    inputs: dict[str, str] = Field(default_factory=dict)
    #: the file name each input had on the client's side, by slot (absent in older records)
    input_names: dict[str, str] = Field(default_factory=dict)
    #: what was uploaded, for each input stored in another form (absent in older records)
    uploaded: dict[str, UploadedInput] = Field(default_factory=dict)
    error: JobError | None = None
    #: things the user should know about a result (e.g. voxels with non-finite input), from this attempt
    warnings: list[str] = Field(default_factory=list)
    results: list[ResultFile] = Field(default_factory=list)
    attempts: int = 0
    worker_losses: int = 0
    runner: str | None = None
    cancel_requested: bool = False


class JobNotFound(KeyError):
    """No job with this id (or it was deleted)."""


class InvalidCursor(ValueError):
    """A listing cursor that no listing handed out: not a job id."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def input_name(client_name: str) -> str:
    """The name to keep of a file as the client named it: its last path part (some clients
    send a whole path, with ``/`` or ``\\``), without control characters, at most 255
    characters."""
    name = _CONTROL_CHARS.sub("", client_name.replace("\\", "/").rsplit("/", 1)[-1])
    return name[-_MAX_NAME_CHARS:]


def with_input_names(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each stored input file named in ``names`` (``fod.mif``, alone or at the
    end of a path) replaced by the name it had on the client's side, ``names[stored]``."""
    if not names:
        return text
    stored = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.-])(?:[^\s'\"]*/)?({stored})(?![\w.])")
    return pattern.sub(lambda match: names[match.group(1)], text)


def new_job_id() -> str:
    """28 hex digits: milliseconds since the epoch, then 64 random bits.

    Ids sort by creation time, which gives listing its order and cursors their meaning.
    """
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def _version(stat: os.stat_result) -> tuple[int, int, int]:
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _is_job_id(text: str) -> bool:
    return len(text) == _ID_HEX and all(c in "0123456789abcdef" for c in text)


def _remove_tree(path: str | Path) -> OSError | None:
    """``shutil.rmtree`` that goes on past errors, as ``ignore_errors`` does, and returns the
    first one (None if the tree is gone, or was never there)."""
    errors: list[OSError] = []
    shutil.rmtree(path, onerror=lambda function, failed, exc_info: errors.append(exc_info[1]))
    return next((error for error in errors if not isinstance(error, FileNotFoundError)), None)


class JobStore:
    """Create, read, update, list and delete job folders under ``data_dir``."""

    def __init__(self, data_dir: Path | str):
        self.data_dir = Path(data_dir)
        self.jobs_dir = self.data_dir / "jobs"
        self.staging_dir = self.data_dir / "staging"
        self.trash_dir = self.data_dir / "trash"
        for folder in (self.jobs_dir, self.staging_dir, self.trash_dir):
            folder.mkdir(parents=True, exist_ok=True)
        # Parsed job.json by (inode, mtime, size): a poll of a batch lists every job, and
        # parsing is most of its cost (python3 -m bench.service load).
        self._parsed: dict[str, tuple[tuple[int, int, int], JobRecord]] = {}
        self._ids: tuple[tuple[int, ...], float, list[str]] | None = None

    # -- paths ---------------------------------------------------------------------------
    def job_dir(self, job_id: str) -> Path:
        if not _is_job_id(job_id):
            raise JobNotFound(job_id)
        return self.jobs_dir / job_id

    def inputs_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "inputs"

    def outputs_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "outputs"

    def log_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "log.txt"

    def result_path(self, job_id: str, name: str) -> Path:
        """Path of a listed result file; raises :class:`JobNotFound` for any other name."""
        record = self.read(job_id)
        if name not in {result.name for result in record.results}:
            raise JobNotFound(f"{job_id}/{name}")
        return self.outputs_dir(job_id) / name

    # -- creation ------------------------------------------------------------------------
    @contextlib.contextmanager
    def staging(self) -> Iterator[tuple[str, Path]]:
        """A fresh ``(job_id, folder)`` to assemble a job in; removed unless committed (or, when
        removing it fails, by the janitor). Its ``job.lock`` is held until the block ends, so
        commit last: the job's own lock is taken only once the block has ended."""
        job_id, folder, handle = self._locked_staging_folder()
        try:
            (folder / "inputs").mkdir()
            yield job_id, folder
        finally:
            try:
                if (error := _remove_tree(folder)) is not None:
                    logger.warning("could not remove the staging folder %s (%s); the janitor removes it", folder, error)
            finally:
                handle.close()

    def _locked_staging_folder(self) -> tuple[str, Path, BinaryIO]:
        # A lock file, not the folder: on NFS flock is a byte-range lock, which needs a file
        # opened for writing.
        while True:
            job_id = new_job_id()
            folder = self.staging_dir / job_id
            folder.mkdir()
            try:
                handle = open(folder / "job.lock", "a+b")
            except FileNotFoundError:
                continue  # a janitor took it for a leftover before it was locked
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                if os.stat(folder / "job.lock").st_ino == os.fstat(handle.fileno()).st_ino:
                    return job_id, folder, handle
            except FileNotFoundError:
                pass  # as above, while the lock was awaited
            handle.close()

    def commit(self, folder: Path, record: JobRecord) -> JobRecord:
        """Write ``job.json`` into a staging folder and move it into ``jobs/`` in one rename."""
        write_bytes_atomic(folder / "job.json", record.model_dump_json(indent=1).encode(), fsync=True)
        os.replace(folder, self.jobs_dir / record.id)
        return record

    # -- reading and updating ------------------------------------------------------------
    def read(self, job_id: str) -> JobRecord:
        """The job's record; shared between readers, so treat it as read-only (change a job
        with :meth:`update`)."""
        path = self.job_dir(job_id) / "job.json"
        cached = self._parsed.get(job_id)
        try:
            # job.json is only ever replaced by a rename: a new inode for every version
            if cached is not None and cached[0] == _version(os.stat(path)):
                return cached[1]
            with open(path, "rb") as handle:
                version = _version(os.fstat(handle.fileno()))
                record = JobRecord.model_validate_json(handle.read())
        except FileNotFoundError:
            raise JobNotFound(job_id) from None
        if len(self._parsed) >= _PARSED_CACHE_SIZE:
            self._parsed.clear()
        self._parsed[job_id] = (version, record)
        return record

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        folder = self.job_dir(job_id)
        try:
            handle = open(folder / "job.lock", "a+b")
        except FileNotFoundError:
            raise JobNotFound(job_id) from None
        with handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def update(
        self, job_id: str, change: Callable[[JobRecord], JobRecord | None]
    ) -> JobRecord | None:
        """Read, change and write back ``job.json`` under the job's lock.

        ``change`` gets the current record and returns the new one, or None to leave it as
        it is (then None is returned).
        """
        with self._locked(job_id):
            record = self.read(job_id)
            changed = change(record.model_copy(deep=True))
            if changed is None:
                return None
            try:
                write_bytes_atomic(
                    self.job_dir(job_id) / "job.json", changed.model_dump_json(indent=1).encode(), fsync=True
                )
            except FileNotFoundError:  # deleted meanwhile
                raise JobNotFound(job_id) from None
            return changed

    def set_progress(self, job_id: str, fraction: float) -> None:
        def change(record: JobRecord) -> JobRecord | None:
            if record.status is not JobStatus.running:
                return None
            record.progress = min(1.0, max(record.progress, float(fraction)))
            return record

        self.update(job_id, change)

    # -- liveness and cancellation -------------------------------------------------------
    def touch_heartbeat(self, job_id: str) -> None:
        path = self.job_dir(job_id) / "heartbeat"
        path.touch()
        os.utime(path)

    def heartbeat_age(self, job_id: str) -> float:
        """Seconds since the last heartbeat (infinite when there was none)."""
        try:
            return max(0.0, time.time() - (self.job_dir(job_id) / "heartbeat").stat().st_mtime)
        except FileNotFoundError:
            return float("inf")

    def mark_cancel_requested(self, job_id: str) -> None:
        (self.job_dir(job_id) / "cancel").touch()

    def cancel_requested(self, job_id: str) -> bool:
        return (self.job_dir(job_id) / "cancel").exists()

    def user_text(self, text: str, job_id: str | None = None) -> str:
        """``text`` as a user may read it (a job's log or error, a problem's detail): one line,
        the server's folders cut out (a file of job ``job_id`` by its place in the job's
        folder, one elsewhere on the data volume by its place there, another by its name), and
        the job's inputs by the names they had on the client's side, not the stored ones."""
        text = " ".join(text.split())
        job_dir = self.data_dir if job_id is None else self.job_dir(job_id)
        for folder in dict.fromkeys((job_dir, job_dir.resolve(), self.data_dir, self.data_dir.resolve())):
            if folder.is_absolute():
                text = text.replace(f"{folder}/", "").replace(str(folder), ".")
        text = _ABSOLUTE_PATH.sub(r"\1", text)
        return text if job_id is None else self._with_input_names(text, job_id)

    def _with_input_names(self, text: str, job_id: str) -> str:
        try:
            record = self.read(job_id)
        except JobNotFound:
            return text
        names: dict[str, str] = {}
        for slot, client_name in record.input_names.items():
            uploaded = record.uploaded.get(slot)
            for stored in (record.inputs.get(slot), uploaded.name if uploaded else None):
                if stored:
                    names[stored] = client_name
        return with_input_names(text, names)

    def append_log(self, job_id: str, message: str) -> None:
        """Add a line to the job's log: its UTC time and ``message`` (:meth:`user_text`)."""
        stamp = utc_now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = self.user_text(message, job_id)
        with open(self.log_path(job_id), "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {line}\n")

    # -- listing and deleting ------------------------------------------------------------
    def job_ids(self) -> list[str]:
        """All job ids, newest first (shared between callers: do not change it). A listing is
        reused for up to a second while the folder's inode, mtime, link count and size are
        unchanged (a job added or removed changes them): the 50 pages of a 50,000-job batch
        list the folder once, not 50 times."""
        folder = os.stat(self.jobs_dir)
        key = (folder.st_ino, folder.st_mtime_ns, folder.st_nlink, folder.st_size)
        now = time.monotonic()
        cached = self._ids
        if cached is not None and cached[0] == key and now - cached[1] < _IDS_FRESH_SECONDS:
            return cached[2]
        ids = sorted((n for n in os.listdir(self.jobs_dir) if _is_job_id(n)), reverse=True)
        self._ids = (key, now, ids)
        return ids

    def records(
        self,
        *,
        tenant: str | None = None,
        status: JobStatus | None = None,
        label: str | None = None,
        before: str | None = None,
    ) -> Iterator[JobRecord]:
        """Jobs newest first, filtered, read one at a time in one pass over the store;
        ``before``: only jobs older than this id."""
        for job_id in self.job_ids():
            if before is not None and job_id >= before:
                continue
            try:
                record = self.read(job_id)
            except JobNotFound:  # deleted while listing
                continue
            if tenant is not None and record.tenant != tenant:
                continue
            if status is not None and record.status is not status:
                continue
            if label is not None and record.label != label:
                continue
            yield record

    def list(
        self,
        *,
        tenant: str | None = None,
        status: JobStatus | None = None,
        label: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[JobRecord], str | None]:
        """Jobs newest first, filtered; returns the page and the cursor of the next page.

        ``cursor`` is the id of the last job of the previous page; anything else (an empty
        string too) is an :class:`InvalidCursor`.
        """
        if cursor is not None and not _is_job_id(cursor):
            raise InvalidCursor(cursor)
        page = list(itertools.islice(self.records(tenant=tenant, status=status, label=label, before=cursor),
                                     limit + 1))
        return (page[:limit], page[limit - 1].id) if len(page) > limit else (page, None)

    def delete(self, job_id: str) -> None:
        """Remove a job folder; it disappears in one rename, then its files are removed."""
        folder = self.job_dir(job_id)
        grave = self.trash_dir / f"{job_id}.{secrets.token_hex(4)}"
        try:
            os.replace(folder, grave)
        except FileNotFoundError:
            raise JobNotFound(job_id) from None
        shutil.rmtree(grave, ignore_errors=True)

    def expire_finished(self, older_than: float) -> list[str]:
        """Delete the jobs that finished more than ``older_than`` seconds ago; their ids."""
        expired = []
        now = utc_now()
        for job_id in self.job_ids():
            try:
                record = self.read(job_id)
                if (record.status in TERMINAL_STATUSES and record.finished_at is not None
                        and (now - record.finished_at).total_seconds() > older_than):
                    self.delete(job_id)
                    expired.append(job_id)
            except JobNotFound:  # deleted meanwhile (by its owner, or another API's janitor)
                continue
        return expired

    def sweep_staging(self, older_than: float = 0.0) -> int:
        """Remove the staging folders no upload holds (left by a crashed API, or whose removal
        failed, e.g. for want of file handles) and what ``delete`` left in ``trash/``, when
        older than ``older_than`` seconds; the number removed."""
        removed = 0
        now = time.time()
        for base in (self.staging_dir, self.trash_dir):
            for entry in os.scandir(base):
                with contextlib.suppress(FileNotFoundError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > older_than:
                        removed += self._remove_unheld(entry.path)
        return removed

    @staticmethod
    def _remove_unheld(path: str) -> int:
        """Remove ``path`` unless a process holds its ``job.lock`` (an upload under way, or a
        worker on a job deleted meanwhile); held meanwhile, so that an upload locking a new
        folder after the check finds it gone and starts another. 1 if it is gone."""
        try:
            handle = open(os.path.join(path, "job.lock"), "a+b")
        except OSError:
            return 0  # gone meanwhile, or the disk is full: the next pass tries again
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0
            return 0 if _remove_tree(path) is not None else 1
