"""Checksums of the inputs: a read that hashes its pieces on a thread of their own gives
hashlib's digest of the file and the file's bytes."""

from __future__ import annotations

import hashlib

import pytest

from worker import provenance


@pytest.mark.parametrize("size, room", [(10_000, 10_000), (10_000, 12_345), (9_999, 4_000), (0, 100), (500, 800)])
def test_read_and_hash_into_is_readinto_with_the_files_digest(tmp_path, monkeypatch, size, room):
    monkeypatch.setattr(provenance, "_HASHED_PIECE", 1_000)  # many pieces, the last one short
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    digest, out = hashlib.sha256(), bytearray(room)
    with open(path, "rb") as handle:
        filled = provenance.read_and_hash_into(handle, memoryview(out), digest)
        provenance.hash_to_end(handle, digest)  # what is left past the view
    assert filled == min(size, room)
    assert bytes(out[:filled]) == data[:filled]
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest() == provenance.file_sha256(path)
