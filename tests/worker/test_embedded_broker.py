"""The embedded broker (worker/embedded_broker.py): an unreadable message file is set aside,
not fatal; a publish on a full disk fails and leaves nothing in the queue folder."""

from __future__ import annotations

import base64
import errno
import json
import logging
import shutil
from queue import Empty

import pytest
from kombu.exceptions import OperationalError

from worker.celery_app import create_celery_app, publish_job, waiting_job_ids

_QUEUE = "fibertensor"


def _take(app) -> dict | None:
    """The next message of the queue, as a worker's consumer takes it (None: empty)."""
    with app.connection_for_read() as connection:
        try:
            return connection.default_channel._get(_QUEUE)
        except Empty:
            return None


def _job_id(message: dict) -> str:
    return json.loads(base64.b64decode(message["body"]))[0][0]


def test_unreadable_message_files_are_quarantined_not_fatal(tmp_path, caplog):
    app = create_celery_app(data_dir=tmp_path)
    broker = tmp_path / "broker"
    publish_job(app, "a" * 28)
    # what kombu's own transport left on a full disk, and other garbage, sorted before the job
    bad = {
        "0001_empty.fibertensor.msg": b"",
        "0002_truncated.fibertensor.msg": b'{"body": "W1siYWJj',
        "0003_list.fibertensor.msg": b"[1, 2]",
        "0004_binary.fibertensor.msg": b"\xff\xfe\x00",
        "0005_no_properties.fibertensor.msg": b'{"body": "e30="}',
    }
    for name, content in bad.items():
        (broker / "queue" / name).write_bytes(content)
    assert waiting_job_ids(app) == {"a" * 28}  # the janitor's look at the queue skips them too

    with caplog.at_level(logging.WARNING, logger="worker.embedded_broker"):
        message = _take(app)
    assert _job_id(message) == "a" * 28
    assert _take(app) is None
    assert list((broker / "queue").iterdir()) == [] and list((broker / "claimed").iterdir()) == []
    assert {p.name: p.read_bytes() for p in (broker / "quarantine").iterdir()} == bad
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5 and all("unreadable broker file" in line and "moved to" in line for line in lines)
    assert "an empty file" in lines[0] and "JSONDecodeError" in lines[1] and "not an object" in lines[2]
    assert "UnicodeDecodeError" in lines[3] and "KeyError: 'properties'" in lines[4]


def test_a_publish_on_a_full_disk_leaves_nothing_behind(small_filesystem):
    data_dir = small_filesystem(1)
    app = create_celery_app(data_dir=data_dir)
    queue = data_dir / "broker" / "queue"
    ballast = data_dir / "ballast"
    with open(ballast, "wb") as handle:
        with pytest.raises(OSError) as full:
            handle.write(bytes(shutil.disk_usage(data_dir).free + (1 << 20)))
    assert full.value.errno == errno.ENOSPC

    with pytest.raises(OperationalError, match="No space left on device"):
        publish_job(app, "b" * 28)
    assert list(queue.iterdir()) == []  # kombu's own transport left an empty .msg here
    assert [p.name for p in (data_dir / "broker" / "control").iterdir()] == [f"{_QUEUE}.exchange.lock"]

    ballast.unlink()
    publish_job(app, "c" * 28)
    assert _job_id(_take(app)) == "c" * 28
    assert list(queue.iterdir()) == [] and list((data_dir / "broker" / "quarantine").iterdir()) == []


def test_exchange_tables_survive_a_torn_file(tmp_path, caplog):
    """A binding table torn by an in-place write (as kombu's own transport writes them; the
    fanout of /readyz's pings routes through them) is set aside with a log line; binding again
    writes a whole one."""
    app = create_celery_app(data_dir=tmp_path)
    publish_job(app, "d" * 28)
    table = tmp_path / "broker" / "control" / f"{_QUEUE}.exchange"
    bound = json.loads(table.read_text())
    assert bound == [[_QUEUE, "", _QUEUE]]
    torn = json.dumps(bound)[:-3]
    table.write_text(torn)
    with app.connection_for_write() as connection, caplog.at_level(logging.WARNING, logger="worker.embedded_broker"):
        channel = connection.default_channel
        assert channel.get_table(_QUEUE) == []
        assert (tmp_path / "broker" / "quarantine" / table.name).read_text() == torn
        channel._queue_bind(_QUEUE, _QUEUE, "", _QUEUE)
    assert json.loads(table.read_text()) == bound
    assert "unreadable broker file fibertensor.exchange (JSONDecodeError" in caplog.text
