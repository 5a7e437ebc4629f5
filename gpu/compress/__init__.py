"""Tucker compression: ST-HOSVD whose TTM chains run in FP16 with Kronecker-product scaling
and a forward error bound (the low-precision TTMc poster)."""

from gpu.lazy_exports import lazy_exports

_EXPORTS = {"TuckerDecomposition": "hosvd", "st_hosvd": "hosvd", "tucker_reconstruct": "hosvd",
            "ttmc": "ttmc", "TTMcOverflowError": "ttmc"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
