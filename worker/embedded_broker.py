"""The embedded broker: kombu's filesystem transport, made safe on a full or failing disk.

kombu's own transport opens a message file and then writes it, so a full data volume leaves
an empty or truncated ``.msg`` file in the queue folder; a worker that reads it dies
(``JSONDecodeError`` is not an error Celery recovers from) and dies again on every restart
while the file is there. Here a message (and an exchange's binding table) is written under a
temporary name in the same folder, synced and renamed, so it appears whole or not at all:
on a full disk the publish fails and nothing is left. A consumer claims a message by renaming
it out of the queue folder (one consumer wins), and a message it cannot parse, whatever wrote
it, is moved to the quarantine folder with one WARNING line instead of ending the worker.
"""

from __future__ import annotations

import fcntl
import logging
import os
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.json import dumps, loads

from worker.io.atomic import write_bytes_atomic

__all__ = ["Transport", "TRANSPORT"]

logger = logging.getLogger(__name__)

#: Celery's ``broker_transport`` for this transport.
TRANSPORT = f"{__name__}:Transport"


class Channel(filesystem.Channel):
    """Whole messages in, unreadable messages aside."""

    @property
    def claimed_folder(self) -> Path:
        return Path(self.transport_options["claimed_folder"])

    @property
    def quarantine_folder(self) -> Path:
        return Path(self.transport_options["quarantine_folder"])

    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        path = Path(self.data_folder_out) / name
        try:
            write_bytes_atomic(path, dumps(payload).encode(), fsync=True)
        except OSError as exc:
            raise ChannelError(f"cannot add a message to {path.parent} ({exc}); nothing was written") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = self.claimed_folder / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another consumer took it
            try:
                payload = claimed.read_bytes()
            except OSError as exc:
                os.rename(claimed, os.path.join(self.data_folder_in, name))  # for a later attempt
                raise ChannelError(f"cannot read message {name} ({exc})") from exc
            try:
                message = loads(payload.decode("utf-8"))
                if not isinstance(message, dict):
                    raise ValueError(f"a JSON {type(message).__name__}, not an object")
                virtual.Message(message, channel=self)  # what the consumer makes of it, which must not raise
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON, UTF-8, base64 are ValueErrors
                self._quarantine(claimed, f"{type(exc).__name__}: {exc}" if payload else "an empty file")
                continue
            claimed.unlink()
            return message
        raise Empty()

    def _quarantine(self, path: Path, reason: str) -> None:
        """Move an unreadable file out of the way; a job whose message it was is republished by the
        API's janitor, as for any job queued without a message."""
        target = self.quarantine_folder / path.name
        os.replace(path, target)
        logger.warning("unreadable broker file %s (%s) moved to %s", path.name, reason, target)

    # Exchange tables: read, changed and replaced whole under a lock file beside them.
    def get_table(self, exchange):
        try:
            return super().get_table(exchange)
        except ValueError as exc:  # written by a transport that wrote in place
            file = self._exchange_file(exchange)
            self._quarantine(file, f"{type(exc).__name__}: {exc}")
            return []

    def _change_table(self, exchange, change) -> None:
        file = self._exchange_file(exchange)
        try:
            with open(f"{file}.lock", "a+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                queues = self.get_table(exchange)
                changed = change(list(queues))
                if changed != queues:
                    write_bytes_atomic(file, dumps(changed).encode(), fsync=True)
        except OSError as exc:
            raise ChannelError(f"cannot update {file} ({exc})") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self.control_folder.mkdir(exist_ok=True)
        self._change_table(exchange, lambda queues: queues if entry in queues else [entry, *queues])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        if self._exchange_file(exchange).exists():
            self._change_table(exchange, lambda queues: [q for q in queues if q != entry])


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`; its transport options are kombu's
    plus ``claimed_folder`` and ``quarantine_folder`` (both on the queue's file system)."""

    Channel = Channel
    _states: dict[str, virtual.BrokerState] = {}

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        # kombu's transport keeps one state (which bindings exist) for the whole process; a
        # process using two data dirs would then never write the second one's binding tables.
        self.state = self._states.setdefault(client.transport_options["control_folder"], virtual.BrokerState())
