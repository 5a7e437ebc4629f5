"""The conv tests write generated kernels into a kernel cache of their own, not the user's."""

import pytest

from gpu.conv.kernel_cache import CACHE_ENV


@pytest.fixture(autouse=True, scope="session")
def kernel_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("kernels")))
        yield
