"""The three settings every input is checked against (``FIBERTENSOR_MAX_INPUT_BYTES``,
``FIBERTENSOR_MAX_VOXELS``, ``FIBERTENSOR_MAX_JOB_MEMORY_BYTES``): fields of the server's
:class:`service.settings.Settings`, and read from the environment the same way, with the same
checks, by the local commands (:func:`input_limit_settings_from_environment`), which have no
use for pydantic-settings and the asyncio it imports.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from worker.input_limits import InputLimits

__all__ = ["InputLimitSettings", "input_limit_settings_from_environment", "ENV_PREFIX"]

ENV_PREFIX = "FIBERTENSOR_"


class InputLimitSettings(BaseModel):
    """The input limits' settings; :class:`service.settings.Settings` has them as its own."""

    max_input_bytes: int = Field(
        8 * 1024**3,
        gt=0,
        description="Largest decompressed input array (header dims × dtype size), checked "
        "before any data is decompressed (protects against gzip bombs).",
    )
    max_voxels: int = Field(
        64 * 1024**2, gt=0, description="Largest number of voxels (spatial grid) of an input."
    )
    max_job_memory_bytes: int = Field(
        4 * 1024**3,
        gt=0,
        description="Largest working memory of one job (its arrays, estimated from the input "
        "headers before it is queued; 413 above). Size it to a worker's memory less about "
        "1 GiB for the process itself (Python, numba, the CUDA context).",
    )

    @property
    def input_limits(self) -> "InputLimits":
        """The limits every input passes before its job is queued (API and CLI alike)."""
        from worker.input_limits import InputLimits  # imports nibabel: not at CLI start-up

        return InputLimits(self.max_input_bytes, self.max_voxels, self.max_job_memory_bytes)


def input_limit_settings_from_environment() -> InputLimitSettings:
    """The input limits from ``FIBERTENSOR_*`` variables as :class:`service.settings.Settings`
    reads them (names in any case); a bad value raises pydantic's ``ValidationError``."""
    given = {name.upper(): value for name, value in os.environ.items()}
    return InputLimitSettings.model_validate(
        {field: given[ENV_PREFIX + field.upper()] for field in InputLimitSettings.model_fields
         if ENV_PREFIX + field.upper() in given})
