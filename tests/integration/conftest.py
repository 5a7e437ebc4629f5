"""A private redis-server per test module that needs one."""

from __future__ import annotations

import pytest

from tests.integration.processes import start_redis, stop


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop(proc)
