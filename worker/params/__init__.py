"""The parameters of every job kind, one pydantic model each, declared once.

Light on purpose: it imports pydantic and the kernels' limits (:mod:`gpu.peaks.limits`)
only, never numba, scipy, nibabel or kernel code, so the API, the CLI's parser and the
job-kind registry can use it without loading an engine.
"""

from gpu.lazy_exports import lazy_exports

# Exported on first use: a command imports its own kind's model only.
_EXPORTS = {
    **dict.fromkeys(["JobParams", "FieldRuleError", "params_from_text", "error_fields", "is_list_field"], "base"),
    "PeaksParams": "peaks",
    **dict.fromkeys(["CPConvParams", "TuckerConvParams", "CPDecomposeParams", "TuckerDecomposeParams"], "conv"),
    **dict.fromkeys(["CompressParams", "DecompressParams"], "compress"),
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
