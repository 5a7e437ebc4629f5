"""The parameters of every job kind, one pydantic model each, declared once.

Light on purpose: it imports pydantic and the kernels' limits (:mod:`gpu.peaks.limits`)
only, never numba, scipy, nibabel or kernel code, so the API, the CLI's parser and the
job-kind registry can use it without loading an engine.
"""

from worker.params.base import FieldRuleError, JobParams, error_fields, is_list_field, params_from_text
from worker.params.compress import CompressParams, DecompressParams
from worker.params.conv import CPConvParams, CPDecomposeParams, TuckerConvParams, TuckerDecomposeParams
from worker.params.peaks import PeaksParams

__all__ = ["JobParams", "FieldRuleError", "params_from_text", "error_fields", "is_list_field", "PeaksParams",
           "CPConvParams", "TuckerConvParams", "CPDecomposeParams", "TuckerDecomposeParams", "CompressParams",
           "DecompressParams"]
