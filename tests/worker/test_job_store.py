"""The job folder as source of truth: atomic creation, locked updates, listing, deletion."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from worker.job_store import InvalidCursor, JobNotFound, JobRecord, JobStatus, JobStore, new_job_id, utc_now


def _create(store: JobStore, tenant="t", label=None) -> JobRecord:
    with store.staging() as (job_id, folder):
        (folder / "inputs" / "volume.nii").write_bytes(b"x")
        record = JobRecord(id=job_id, kind="scale", tenant=tenant, label=label, created_at=utc_now(),
                           inputs={"volume": "volume.nii"})
        return store.commit(folder, record)


def test_ids_sort_by_creation_time():
    first = new_job_id()
    time.sleep(0.002)
    second = new_job_id()
    assert len(first) == 28 and first < second


def test_commit_moves_a_complete_job_into_place(tmp_path):
    store = JobStore(tmp_path)
    record = _create(store)
    assert list(store.staging_dir.iterdir()) == []
    assert sorted(p.name for p in store.job_dir(record.id).iterdir()) == ["inputs", "job.json", "job.lock"]
    assert store.read(record.id) == record


def test_staging_is_removed_when_the_upload_fails(tmp_path):
    store = JobStore(tmp_path)
    with pytest.raises(RuntimeError):
        with store.staging() as (_, folder):
            (folder / "inputs" / "partial.nii").write_bytes(b"half")
            raise RuntimeError("client went away")
    assert list(store.staging_dir.iterdir()) == [] and store.job_ids() == []


def _bump(data_dir, job_id, n):
    store = JobStore(data_dir)
    for _ in range(n):
        store.update(job_id, lambda r: r.model_copy(update={"attempts": r.attempts + 1}))


def test_updates_from_many_processes_are_not_lost(tmp_path):
    store = JobStore(tmp_path)
    job_id = _create(store).id
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(tmp_path, job_id, 50)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert store.read(job_id).attempts == 150
    # no temporary files left from the atomic replaces
    assert sorted(p.name for p in store.job_dir(job_id).iterdir()) == ["inputs", "job.json", "job.lock"]


def test_update_returning_none_changes_nothing(tmp_path):
    store = JobStore(tmp_path)
    record = _create(store)
    assert store.update(record.id, lambda r: None) is None
    assert store.read(record.id) == record


def test_list_filters_and_cursor(tmp_path):
    store = JobStore(tmp_path)
    made = []
    for i in range(5):
        made.append(_create(store, tenant="a" if i < 4 else "b", label=f"L{i % 2}"))
        time.sleep(0.002)
    ids = [r.id for r in made]
    page, cursor = store.list(tenant="a", limit=3)
    assert [r.id for r in page] == ids[3::-1][:3] and cursor == ids[1]
    page, cursor = store.list(tenant="a", limit=3, cursor=cursor)
    assert [r.id for r in page] == [ids[0]] and cursor is None
    assert [r.id for r in store.list(label="L1")[0]] == [ids[3], ids[1]]
    assert store.list(status=JobStatus.running)[0] == []
    # a page of exactly what is left has no next page
    assert store.list(tenant="a", limit=4) == (made[3::-1], None)
    # a cursor is a job id: an empty one listed nothing, a made-up one the first page
    for cursor in ("", "garbage", ids[0].upper(), ids[0] + "0"):
        with pytest.raises(InvalidCursor):
            store.list(cursor=cursor)


def test_records_reads_every_job_once_in_one_pass(tmp_path, monkeypatch):
    """What a batch's results.zip walks: the filtered jobs newest first, as the pages give them."""
    store = JobStore(tmp_path)
    made = []
    for i in range(7):
        made.append(_create(store, tenant="a" if i % 3 else "b", label="L"))
        time.sleep(0.002)  # ids order by creation time, to the millisecond
    listed, reads = [], []
    monkeypatch.setattr(store, "job_ids", lambda ids=store.job_ids: listed.append(1) or ids())
    monkeypatch.setattr(store, "read", lambda job_id, read=store.read: reads.append(job_id) or read(job_id))
    records = list(store.records(tenant="a", label="L"))
    assert records == [r for r in reversed(made) if r.tenant == "a"]
    assert len(listed) == 1 and sorted(reads) == sorted(r.id for r in made)
    assert [r.id for r in store.records(tenant="a", before=records[1].id)] == [r.id for r in records[2:]]


def test_the_listing_of_jobs_is_reused_only_while_nothing_changed(tmp_path, monkeypatch):
    """Paging through a batch lists jobs/ once; a job added or deleted is listed at once."""
    import worker.job_store as job_store

    store = JobStore(tmp_path)
    made = [_create(store, label="L").id for _ in range(5)]
    listings = []
    monkeypatch.setattr(job_store.os, "listdir", lambda path, listdir=os.listdir: listings.append(path) or listdir(path))
    pages, cursor = [], None
    while True:
        page, cursor = store.list(label="L", limit=2, cursor=cursor)
        pages.append([r.id for r in page])
        if cursor is None:
            break
    assert sum(pages, []) == sorted(made, reverse=True) and len(listings) == 1
    added = _create(store, label="L").id
    assert added in store.job_ids() and len(listings) == 2  # (ids made in one millisecond order at random)
    store.delete(made[0])
    assert made[0] not in store.job_ids() and len(listings) == 3
    monkeypatch.setattr(job_store, "_IDS_FRESH_SECONDS", 0.0)  # past its second: listed again
    assert store.job_ids() == store.job_ids() and len(listings) == 5


def test_delete_and_bad_ids(tmp_path):
    store = JobStore(tmp_path)
    record = _create(store)
    store.delete(record.id)
    assert store.job_ids() == [] and list(store.trash_dir.iterdir()) == []
    with pytest.raises(JobNotFound):
        store.read(record.id)
    with pytest.raises(JobNotFound):
        store.delete(record.id)
    for bad in ("../jobs", "x" * 28, "", "0" * 27):
        with pytest.raises(JobNotFound):
            store.job_dir(bad)


def test_expire_finished_removes_only_jobs_that_ended_long_enough_ago(tmp_path):
    from datetime import timedelta

    store = JobStore(tmp_path)
    ended = {}
    for status, hours_ago in [("succeeded", 30), ("failed", 30), ("cancelled", 30), ("succeeded", 1),
                              ("running", 30), ("queued", None)]:
        job_id = _create(store).id
        finished = None if hours_ago is None else utc_now() - timedelta(hours=hours_ago)
        # a running job has no finished_at; its started_at is as old as the others' ends
        fields = {"status": JobStatus(status),
                  "started_at" if status == "running" else "finished_at": finished}
        store.update(job_id, lambda r: r.model_copy(update=fields))
        ended[job_id] = (status, hours_ago)
    expired = store.expire_finished(older_than=24 * 3600)
    assert sorted(expired) == sorted(j for j, (s, h) in ended.items() if s != "running" and h == 30)
    assert sorted(store.job_ids()) == sorted(set(ended) - set(expired))
    assert list(store.trash_dir.iterdir()) == [] and store.expire_finished(older_than=24 * 3600) == []


def test_heartbeat_cancel_and_log(tmp_path):
    store = JobStore(tmp_path)
    job_id = _create(store).id
    assert store.heartbeat_age(job_id) == float("inf") and not store.cancel_requested(job_id)
    store.touch_heartbeat(job_id)
    assert store.heartbeat_age(job_id) < 5
    store.mark_cancel_requested(job_id)
    assert store.cancel_requested(job_id)
    store.append_log(job_id, "hello")
    assert store.log_path(job_id).read_text().endswith(" hello\n")


def test_log_lines_and_user_text_are_one_line_without_server_paths(tmp_path):
    store = JobStore(tmp_path / "data")
    job_id = _create(store).id
    partial = store.job_dir(job_id) / "outputs.partial-1" / "peaks.nii.gz"
    error = OSError(28, "No space left on device\n  (quota)", str(partial))
    store.append_log(job_id, f"data volume full: {error}")
    assert store.log_path(job_id).read_text().split(" ", 1)[1] == (
        "data volume full: [Errno 28] No space left on device (quota): 'outputs.partial-1/peaks.nii.gz'\n"
    )
    assert store.user_text(f"read {store.data_dir.resolve()}/trash/x.nii and /srv/other/place/y.mif", job_id) == (
        "read trash/x.nii and y.mif"
    )
    assert store.user_text("see https://example.org/a/b/c, GET /v1/jobs and POST /v1/jobs/peaks") == (
        "see https://example.org/a/b/c, GET /v1/jobs and POST /v1/jobs/peaks"
    )


def test_sweep_staging_removes_only_old_leftovers(tmp_path):
    store = JobStore(tmp_path)
    (store.staging_dir / "old").mkdir()
    (store.staging_dir / "new").mkdir()
    import os

    os.utime(store.staging_dir / "old", (time.time() - 100, time.time() - 100))
    assert store.sweep_staging(older_than=50) == 1
    assert [p.name for p in store.staging_dir.iterdir()] == ["new"]


def test_a_record_keeps_what_was_uploaded_and_older_records_without_it_still_load(tmp_path):
    import json

    from worker.job_kinds import UploadedInput

    store = JobStore(tmp_path)
    uploaded = {"volume": UploadedInput(name="volume.nii.gz", sha256="ab" * 32)}
    record = store.commit(_staged(store), JobRecord(id=new_job_id(), kind="scale", tenant="t", created_at=utc_now(),
                                                    inputs={"volume": "volume.nii"}, uploaded=uploaded))
    stored = json.loads((store.job_dir(record.id) / "job.json").read_text())
    assert stored["uploaded"] == {"volume": {"name": "volume.nii.gz", "sha256": "ab" * 32}}
    assert store.read(record.id).uploaded == uploaded
    # a job.json written before the field existed
    del stored["uploaded"]
    (store.job_dir(record.id) / "job.json").write_text(json.dumps(stored))
    assert store.read(record.id).uploaded == {} and store.read(record.id).inputs == {"volume": "volume.nii"}


def _staged(store: JobStore):
    folder = store.staging_dir / "staged"
    (folder / "inputs").mkdir(parents=True)
    return folder


def test_errors_and_log_name_inputs_as_the_client_did(tmp_path):
    from worker.job_kinds import UploadedInput
    from worker.job_store import input_name

    store = JobStore(tmp_path / "data")
    record = store.commit(_staged(store), JobRecord(
        id=new_job_id(), kind="peaks", tenant="t", created_at=utc_now(),
        inputs={"fod": "fod.nii", "mask": "mask.mif"},
        uploaded={"fod": UploadedInput(name="fod.nii.gz", sha256="ab" * 32)},
        input_names={"fod": "sub-01_fod.nii.gz", "mask": "sub-01 brain.mif"},
    ))
    inputs = store.inputs_dir(record.id)
    assert store.user_text(f"{inputs}/fod.nii: not 4D; mask.mif and fod.nii.gz differ; fod_peaks.nii.gz, "
                           "mask.mif.gz kept", record.id) == (
        "sub-01_fod.nii.gz: not 4D; sub-01 brain.mif and sub-01_fod.nii.gz differ; fod_peaks.nii.gz, "
        "mask.mif.gz kept"
    )
    store.append_log(record.id, f"input error: {inputs}/mask.mif: wrong grid")
    assert store.log_path(record.id).read_text().split(" ", 1)[1] == "input error: sub-01 brain.mif: wrong grid\n"
    # without a job, or for a job recorded before names were kept, the text stays as it is
    assert store.user_text("fod.nii: not 4D") == "fod.nii: not 4D"
    assert input_name("C:\\scans\\sub-02\x07_fod.mif") == "sub-02_fod.mif"
    assert input_name("../../etc/sub-03.nii.gz") == "sub-03.nii.gz"
    assert len(input_name("a" * 300 + ".mif")) == 255 and input_name("a" * 300 + ".mif").endswith("a.mif")


def test_sweep_staging_spares_the_folders_uploads_hold(tmp_path):
    """A staging folder whose upload is under way (its job.lock held, here by another open of
    it, as by another process) stays; one nobody holds, whose removal failed or whose API
    died, goes, with or without a job.lock."""
    store = JobStore(tmp_path)
    with store.staging() as (_, held):
        (held / "inputs" / "volume.nii").write_bytes(b"x")
        (store.staging_dir / "crashed" / "inputs").mkdir(parents=True)
        (store.staging_dir / "crashed" / "job.lock").touch()
        (store.staging_dir / "never-locked").mkdir()
        assert store.sweep_staging() == 2
        assert [p.name for p in store.staging_dir.iterdir()] == [held.name]
        assert (held / "inputs" / "volume.nii").read_bytes() == b"x"
    assert list(store.staging_dir.iterdir()) == []
