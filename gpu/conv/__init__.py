"""Factorized 2D convolution: fused CP (Reustle, Rabbani & Huang) and Tucker (TDC, Xiang et
al.) kernels with pointer-increment tables (Tillet), their decompositions and a direct reference."""

from gpu.lazy_exports import lazy_exports

_EXPORTS = {"CPFactors": "cp", "check_cp_factors": "cp", "cp_conv2d": "cp",
            "TuckerFactors": "tucker", "check_tucker_factors": "tucker", "tucker_conv2d": "tucker",
            "cp_als": "decompose", "tucker2_hosvd": "decompose", "direct_conv2d": "direct"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
