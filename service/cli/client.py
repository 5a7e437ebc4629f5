"""``fibertensor submit KIND ...`` and ``fibertensor jobs``: the service's batch client.

``submit`` gets one sub-command per job kind, built from the kind's input slots (the first
required one positional, the others ``--slot``) and its parameter model (``--param``, checked
here with the model the server uses and sent only when given, so the defaults apply). A
folder in place of the first input submits every matching file in it as one batch,
labelled with the folder's name. Uploads and downloads run ``--transfers`` at a time, each
job's results fetched as soon as it succeeds while the others still run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, TypeVar

import httpx
from tqdm import tqdm

from service.cli import CommandError
from service.cli.model_options import add_model_options, option_values, params_from_options
from service.cli.transfer_options import add_transfers_option
from worker.job_kinds import InputSlot, JobKind, job_kinds

__all__ = ["register", "ServiceClient", "RequestRefused", "REFUSES_THE_INPUT", "in_own_names", "submit_each", "wait_for_jobs",
           "fetch_as_finished", "job_failure", "poll_interval"]

_TERMINAL = {"succeeded", "failed", "cancelled"}
_DEFAULT_SERVER = "http://127.0.0.1:8000"
_POLL_SECONDS = 0.5
_MAX_POLL_SECONDS = 10.0
# Jobs of a batch whose records one poll may have the server read per second: a poll lists
# the whole batch (every record of the label, 1,000 a request), so a UK-Biobank-sized batch
# polled every 0.5 s would keep an API process busy with listings alone
# (docs/decisions/job-listing-cache.md).
_RECORDS_PER_POLL_SECOND = 2000
# Parameters live under their own names in the namespace, apart from the slots and options.
_PARAM = "param_"


class RequestRefused(CommandError):
    """The service answered with an error: its HTTP ``status`` and the problem document's
    ``title`` and ``detail``."""

    def __init__(self, message: str, status: int, title: str, detail: str, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.title, self.detail, self.retry_after = status, title, detail, retry_after


#: Submits a 429 or 503 with ``Retry-After`` is waited out and sent again, at most.
SUBMIT_ATTEMPTS = 8
#: The longest ``Retry-After`` the client waits; a longer one is waited this long.
MAX_RETRY_WAIT = 60.0


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds a 429 or 503 asks the client to wait (``Retry-After`` in seconds), else None."""
    if response.status_code not in (429, 503):
        return None
    try:
        return min(max(float(response.headers["retry-after"]), 0.0), MAX_RETRY_WAIT)
    except (KeyError, ValueError):
        return None


def _origin(url: httpx.URL) -> str:
    """``scheme://host[:port]`` of ``url``, as a message names it."""
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme or 'http'}://{url.host}{port}"


class ServiceClient:
    """A thin httpx wrapper that turns problem documents into :class:`RequestRefused`; one
    instance serves several threads at a time (httpx's client and its connection pool are
    thread-safe)."""

    def __init__(self, server: str, api_key: str | None, timeout: float = 60.0):
        headers = {"X-API-Key": api_key} if api_key else {}
        self.server = server.rstrip("/")
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)

    def __enter__(self) -> "ServiceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise CommandError(
                f"cannot reach {self.server} ({exc}); start the service with `fibertensor "
                "serve` or pass --server"
            ) from None
        if response.status_code >= 400:
            try:
                problem = response.json()
                title, detail = problem.get("title", "error"), problem.get("detail", response.text)
            except ValueError:
                title, detail = response.reason_phrase, response.text
            raise RequestRefused(f"{method} {url} -> {response.status_code} {title}: {detail}",
                                 response.status_code, title, detail, _retry_after(response))
        return response

    def submit(self, kind: str, files: dict[str, Path], fields: dict[str, str]) -> dict[str, Any]:
        """Upload a job; a refusal that says when to come back (429 over a tenant's upload cap,
        503 while the service is busy or its worker restarts, with ``Retry-After``) is waited
        out and sent again, up to :data:`SUBMIT_ATTEMPTS` times."""
        for attempt in range(1, SUBMIT_ATTEMPTS):
            try:
                return self._submit_once(kind, files, fields)
            except RequestRefused as refused:
                if refused.retry_after is None:
                    raise
                time.sleep(refused.retry_after)
        return self._submit_once(kind, files, fields)

    def _submit_once(self, kind: str, files: dict[str, Path], fields: dict[str, str]) -> dict[str, Any]:
        handles = {slot: open(path, "rb") for slot, path in files.items()}
        try:
            return self.request(
                "POST",
                f"/v1/jobs/{kind}",
                files={slot: (files[slot].name, handle) for slot, handle in handles.items()},
                data=fields,
            ).json()
        finally:
            for handle in handles.values():
                handle.close()

    def job(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/jobs/{job_id}").json()

    def jobs(self, *, label: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000}
        if label:
            params["label"] = label
        if status:
            params["status"] = status
        while True:
            page = self.request("GET", "/v1/jobs", params=params).json()
            found.extend(page["jobs"])
            if not page["next_cursor"]:
                return found
            params["cursor"] = page["next_cursor"]

    def delete(self, job_id: str) -> int:
        return self.request("DELETE", f"/v1/jobs/{job_id}").status_code

    def own_url(self, url: str) -> httpx.URL:
        """A URL the service handed out (a result's), resolved against ``--server`` as every
        request is; a :class:`CommandError` for one on another origin, where the API key,
        which goes with every request, must not go."""
        given = httpx.URL(url)
        server = self.http.base_url
        if not (given.scheme or given.host):
            return server.join(given)  # a path from the root, as a browser resolves it
        if (given.scheme, given.host, given.port) != (server.scheme, server.host, server.port):
            raise CommandError(
                f"the service at {self.server} pointed a download at {_origin(given)}, another address; "
                "refused, so that the API key goes nowhere else. Ask the operator to set "
                "FIBERTENSOR_PUBLIC_URL to the address clients use"
            )
        return given

    def download(self, result: dict[str, Any], folder: Path) -> Path:
        """Stream one result into ``folder`` (temporary name, then rename), checking sha256;
        only from the server's own address (:meth:`own_url`), only into ``folder``."""
        name = str(result["name"])
        if Path(name).name != name or name in ("", ".", ".."):
            raise CommandError(f"the service listed a result named {name[:200]!r}, which is not a file name; "
                               "refused, nothing was written")
        url = self.own_url(result["url"])
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        partial = folder / f".{name}.part"
        digest = hashlib.sha256()
        try:
            with self.http.stream("GET", url) as response:
                if response.status_code >= 400:
                    response.read()
                    raise CommandError(f"download of {result['url']} failed: {response.status_code} {response.text}")
                with open(partial, "wb") as handle:
                    for block in response.iter_bytes(1 << 20):
                        digest.update(block)
                        handle.write(block)
        except httpx.TransportError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"download of {result['url']} failed ({exc})") from None
        if digest.hexdigest() != result["sha256"]:
            partial.unlink(missing_ok=True)
            raise CommandError(f"{result['name']}: downloaded bytes do not match the sha256 the server listed; download again")
        os.replace(partial, target)
        return target


def _refresh(client: ServiceClient, jobs: dict[str, dict[str, Any]], label: str | None) -> None:
    """Update unfinished jobs: a labelled batch in one listing, other jobs one by one."""
    pending = [job_id for job_id, j in jobs.items() if j["status"] not in _TERMINAL]
    if label and len(pending) > 1:
        for j in client.jobs(label=label):
            if j["id"] in jobs:
                jobs[j["id"]] = j
        return
    for job_id in pending:
        jobs[job_id] = client.job(job_id)


def poll_interval(batch: int) -> float:
    """Seconds between two polls of a batch of ``batch`` jobs: 0.5 s, longer for a batch of
    over 1,000 (one second per 2,000 jobs), at most 10 s."""
    return min(_MAX_POLL_SECONDS, max(_POLL_SECONDS, batch / _RECORDS_PER_POLL_SECOND))


def wait_for_jobs(client: ServiceClient, job_ids: list[str], quiet: bool, label: str | None = None,
                  on_finished: Callable[[dict[str, Any]], None] = lambda job: None) -> list[dict[str, Any]]:
    """Poll until every job is finished, with one progress bar over the batch; returns the
    jobs in ``job_ids`` order. ``on_finished(job)`` is called in this thread once per job, as
    the polling first sees it finished."""
    jobs = {job_id: client.job(job_id) for job_id in job_ids}
    seen: set[str] = set()
    bar = tqdm(total=len(job_ids), unit="job", disable=quiet, file=sys.stderr, bar_format=
               "{l_bar}{bar}| {n:.2f}/{total} jobs [{elapsed}<{remaining}]")
    try:
        while True:
            for job_id, job in jobs.items():
                if job["status"] in _TERMINAL and job_id not in seen:
                    seen.add(job_id)
                    on_finished(job)
            done = sum(1.0 if j["status"] in _TERMINAL else j["progress"] for j in jobs.values())
            bar.n = done
            counts: dict[str, int] = {}
            for j in jobs.values():
                counts[j["status"]] = counts.get(j["status"], 0) + 1
            bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
            if all(j["status"] in _TERMINAL for j in jobs.values()):
                return list(jobs.values())
            time.sleep(poll_interval(len(jobs)))
            _refresh(client, jobs, label)
    finally:
        bar.close()


_Fetched = TypeVar("_Fetched")


def fetch_as_finished(client: ServiceClient, job_ids: list[str], quiet: bool, label: str | None,
                      fetch: Callable[[dict[str, Any]], _Fetched], transfers: int,
                      ) -> tuple[list[dict[str, Any]], dict[str, _Fetched]]:
    """:func:`wait_for_jobs`, running ``fetch(job)`` (e.g. download its results) for each job
    that succeeds as soon as the polling sees it, on up to ``transfers`` threads, while the
    others still run. Returns the finished jobs (``job_ids`` order) and what each fetch
    returned (job id → value). A fetch that raises stops the wait at the next finished job
    or at the end: the fetches under way end, those not started are dropped, and its
    exception is raised."""
    with ThreadPoolExecutor(transfers, thread_name_prefix="fetch") as pool:
        fetching: dict[str, Future] = {}

        def start(job: dict[str, Any]) -> None:
            for future in fetching.values():
                if future.done() and future.exception() is not None:
                    raise future.exception()
            if job["status"] == "succeeded":
                fetching[job["id"]] = pool.submit(fetch, job)

        try:
            finished = wait_for_jobs(client, job_ids, quiet, label, start)
            return finished, {job_id: future.result() for job_id, future in fetching.items()}
        except BaseException:
            for future in fetching.values():
                future.cancel()
            raise


def _wait_and_download(client: ServiceClient, args: argparse.Namespace, job_ids: list[str], label: str | None,
                       subfolders: dict[str, str] | None) -> tuple[list[dict[str, Any]], dict[str, Path] | None]:
    """Wait for the jobs; with ``--out``, download each job's results as soon as it succeeds
    (``--transfers`` jobs at a time, each job's files one after the other) into ``out /
    subfolders[id]``, or ``out`` itself when ``subfolders`` is None. Returns the finished
    jobs and each job's folder (None without ``--out``)."""
    if not args.out:
        return wait_for_jobs(client, job_ids, args.quiet, label), None
    folders = {job_id: Path(args.out) / subfolders[job_id] if subfolders else Path(args.out) for job_id in job_ids}

    def download(job: dict[str, Any]) -> None:
        for result in job["results"]:
            client.download(result, folders[job["id"]])

    finished, _ = fetch_as_finished(client, job_ids, args.quiet, label, download, args.transfers)
    return finished, folders


def _report(jobs: list[dict[str, Any]], folders: dict[str, Path] | None,
            own_names: Callable[[str, str], str] = lambda job_id, text: text) -> list[tuple[dict[str, Any], str]]:
    """Print succeeded jobs (with the folder their results were downloaded into, if
    ``folders`` maps them) and their warnings (through ``own_names(job_id, text)``); returns
    the other jobs, each with why it did not succeed."""
    failed = []
    for job in jobs:
        if job["status"] == "succeeded":
            if folders is not None:
                print(f"{job['id']} succeeded -> {folders[job['id']]}")
            else:
                print(f"{job['id']} succeeded ({len(job['results'])} results)")
            for warning in job.get("warnings") or []:
                print(f"  ! {own_names(job['id'], warning)}", file=sys.stderr)
        else:
            failed.append((job, job_failure(job)))
    return failed


def _batch_inputs(path: Path, kind: JobKind) -> list[Path]:
    slot = _primary_slot(kind)
    if not path.is_dir():
        if not path.is_file():
            raise CommandError(f"{path} does not exist")
        return [path]
    suffixes = tuple(s.lower() for s in slot.suffixes)
    found = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(suffixes))
    if not found:
        raise CommandError(f"{path} holds no {' or '.join(slot.suffixes)} files to submit")
    return found


def _primary_slot(kind: JobKind):
    return next(slot for slot in kind.inputs if slot.required)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".nii.gz", ".nii", ".npy", ".npz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _stored_name(slot: InputSlot, path: Path) -> str:
    """The name the service stores an upload under: the slot's, with the file's suffix."""
    lower = path.name.lower()
    suffix = next((s for s in sorted(slot.suffixes, key=len, reverse=True) if lower.endswith(s.lower())), "")
    return slot.name + suffix


def in_own_names(text: str, kind: JobKind, files: dict[str, Path]) -> str:
    """``text`` from the service with each stored input (``'fod.nii.gz'``, or its path on the
    server) named by the file the user sent."""
    for slot in kind.inputs:
        if slot.name in files:
            name = re.escape(_stored_name(slot, files[slot.name]))
            stored = re.compile(rf"(?<![\w.-])(?:[^\s'\"]*/)?{name}(?![\w.-])")  # bare, quoted or in a path
            text = stored.sub(lambda match: files[slot.name].name, text)
    return text


#: A refusal of one input (bad file, job too large); any other error (key, kind, service
#: unreachable or full) would refuse every input alike, so it stops the batch.
REFUSES_THE_INPUT = {413, 415, 422}


def submit_each(client: ServiceClient, kind: JobKind, batch: list[dict[str, Path]], fields: dict[str, str],
                on_queued: Callable[[dict[str, Any], dict[str, Path]], None] = lambda job, files: None,
                transfers: int = 1) -> tuple[dict[str, dict[str, Path]], list[tuple[dict[str, Path], str]]]:
    """Submit one ``kind`` job per set of input files (slot → path) of ``batch``, uploading
    up to ``transfers`` at a time: a refusal of one input (:data:`REFUSES_THE_INPUT`) is
    kept, in the user's file names, and the others go on; any other refusal or error stops
    the batch (the uploads under way end, the others are not sent) and is raised. Returns the
    jobs queued (id → files) and the refused inputs (files, why), both in ``batch`` order;
    ``on_queued(job, files)`` is called in this thread as each is queued."""
    sent: dict[int, dict[str, Any]] = {}
    refused: dict[int, tuple[dict[str, Path], str]] = {}
    stop: BaseException | None = None
    upcoming = iter(range(len(batch)))
    with ThreadPoolExecutor(transfers, thread_name_prefix="upload") as pool:
        uploading: dict[Future, int] = {}

        def start_next() -> None:
            index = next(upcoming, None)
            if index is not None:
                uploading[pool.submit(client.submit, kind.name, batch[index], fields)] = index

        for _ in range(transfers):
            start_next()
        while uploading:
            done, _ = wait(uploading, return_when=FIRST_COMPLETED)
            for future in done:
                index = uploading.pop(future)
                files = batch[index]
                try:
                    sent[index] = future.result()
                except RequestRefused as exc:
                    if exc.status in REFUSES_THE_INPUT:
                        refused[index] = (files, in_own_names(f"refused ({exc.status}): {exc.title}: {exc.detail}",
                                                              kind, files))
                    else:
                        stop = stop or exc
                except Exception as exc:  # the service unreachable, a file unreadable: every input alike
                    stop = stop or exc
                else:
                    on_queued(sent[index], files)
                if stop is None:
                    start_next()
    if stop is not None:
        raise stop
    return ({sent[index]["id"]: batch[index] for index in sorted(sent)},
            [refused[index] for index in sorted(refused)])


def job_failure(job: dict[str, Any]) -> str:
    """Why a finished job did not succeed: ``<status>: <title>: <detail>``, or its status."""
    error = job.get("error") or {}
    return f"{job['status']}: {error['title']}: {error['detail']}" if error else job["status"]


def _submit(args: argparse.Namespace) -> int:
    kind: JobKind = args.kind
    primary = _primary_slot(kind)
    path = Path(getattr(args, primary.name))
    inputs = _batch_inputs(path, kind)
    extra = {
        slot.name: Path(getattr(args, slot.name))
        for slot in kind.inputs
        if slot is not primary and getattr(args, slot.name, None)
    }
    fields = option_values(kind.params_model, args, dest_prefix=_PARAM)
    # the server validates with the same model; checking here first saves the upload
    params_from_options(kind.params_model, fields)
    label = args.label or (path.name if path.is_dir() else None)
    if label:
        fields["label"] = label
    with ServiceClient(args.server, args.api_key) as client:
        sent, refused = submit_each(
            client, kind, [{primary.name: source, **extra} for source in inputs], fields,
            lambda job, files: print(f"{job['id']} queued ({files[primary.name].name})"), args.transfers)
        failed = [(files[primary.name], why) for files, why in refused]
        if sent and (args.wait or args.out):
            # a folder's (or several files') results go to a sub-folder per input
            subfolders = {job_id: _stem(files[primary.name]) for job_id, files in sent.items()}
            finished, folders = _wait_and_download(client, args, list(sent), label,
                                                   subfolders if len(inputs) > 1 else None)
            for job, why in _report(finished, folders, lambda job_id, text: in_own_names(text, kind, sent[job_id])):
                files = sent[job["id"]]
                failed.append((files[primary.name], f"job {job['id']} " + in_own_names(why, kind, files)))
    if failed:
        print(f"fibertensor: {len(failed)} of {len(inputs)} inputs failed:", file=sys.stderr)
        for source, why in sorted(failed, key=lambda pair: inputs.index(pair[0])):
            print(f"  {source}: {why}", file=sys.stderr)
        return 1
    return 0


def _jobs(args: argparse.Namespace) -> int:
    with ServiceClient(args.server, args.api_key) as client:
        if args.ids:
            jobs = [client.job(job_id) for job_id in args.ids]
        else:
            jobs = client.jobs(label=args.label, status=args.status)
        if args.cancel:
            if not (args.ids or args.label):
                raise CommandError("--cancel needs job ids or --label, so it never hits every job by accident")
            for job in jobs:
                code = client.delete(job["id"])
                print(f"{job['id']} {'deleted' if code == 204 else 'cancelled'}")
            return 0
        if args.wait or args.out:
            jobs, folders = _wait_and_download(client, args, [j["id"] for j in jobs], args.label,
                                               {j["id"]: j["id"] for j in jobs} if len(jobs) > 1 else None)
            failed = _report(jobs, folders)
            for job, why in failed:
                print(f"{job['id']} {why}", file=sys.stderr)
            return 1 if failed else 0
        # "!" marks a job with warnings, each on a line of its own below it
        print(f"{'id':28}  {'kind':12}  {'status':9}  {'progress':>8}  ! label  (inputs)")
        for job in jobs:
            mark = "!" if job.get("warnings") else " "
            inputs = ", ".join((job.get("input_names") or {}).values())
            print(f"{job['id']:28}  {job['kind']:12}  {job['status']:9}  {job['progress']:8.0%}  "
                  f"{mark} {job['label'] or ''}{f'  ({inputs})' if inputs else ''}")
            for warning in job.get("warnings") or []:
                print(f"{'':30}! {warning}")
        return 0


def _connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", default=os.environ.get("FIBERTENSOR_SERVER", _DEFAULT_SERVER),
        help=f"service URL (default FIBERTENSOR_SERVER or {_DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--api-key", default=os.environ.get("FIBERTENSOR_API_KEY"),
        help="API key sent as X-API-Key (default FIBERTENSOR_API_KEY)",
    )
    parser.add_argument("--wait", action="store_true", help="wait until the jobs finish, with a progress bar")
    parser.add_argument("--out", help="download results here (implies --wait); a sub-folder per job of a batch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_kind_parser(sub: argparse._SubParsersAction, kind: JobKind) -> None:
    primary = _primary_slot(kind)
    parser = sub.add_parser(kind.name, help=kind.summary, description=kind.summary)
    parser.add_argument(
        primary.name, metavar=primary.name.upper(),
        help=f"{primary.description or primary.name} ({', '.join(primary.suffixes)}), or a folder of them (a batch)",
    )
    for slot in kind.inputs:
        if slot is not primary:
            parser.add_argument(f"--{slot.name.replace('_', '-')}", dest=slot.name,
                                help=f"{slot.description or slot.name} ({', '.join(slot.suffixes)})")
    add_model_options(parser, kind.params_model, dest_prefix=_PARAM)
    parser.add_argument("--label", help="batch name (default: the folder's name for a folder)")
    _connection_args(parser)
    add_transfers_option(parser)
    parser.set_defaults(func=_submit, kind=kind)


def register(subparsers: argparse._SubParsersAction) -> None:
    submit = subparsers.add_parser(
        "submit", help="submit jobs to a fibertensor service",
        description="Upload inputs to a fibertensor service; with --wait or --out, wait for "
        "the jobs and download their results.",
    )
    kinds = submit.add_subparsers(dest="kind_name", required=True, metavar="KIND")
    for kind in job_kinds().values():
        _add_kind_parser(kinds, kind)

    jobs = subparsers.add_parser(
        "jobs", help="list, wait for, download or cancel jobs on a fibertensor service",
        description="List jobs (newest first), optionally filtered; --wait/--out wait for "
        "them and download results; --cancel cancels or deletes them.",
    )
    jobs.add_argument("ids", nargs="*", metavar="ID", help="job ids (default: all matching the filters)")
    jobs.add_argument("--label", help="only jobs of this batch")
    jobs.add_argument("--status", choices=sorted(_TERMINAL | {"queued", "running"}), help="only jobs in this state")
    jobs.add_argument("--cancel", action="store_true", help="cancel queued/running jobs, delete finished ones")
    _connection_args(jobs)
    add_transfers_option(jobs, uploads=False)
    jobs.set_defaults(func=_jobs)
