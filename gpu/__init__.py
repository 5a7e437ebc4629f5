"""Numerics and kernels: SH bases, SH→tensor, SS-HOPM, factorized conv, TTMc/Tucker.

No web, queue or file-format code lives here: functions take arrays and return arrays.
"""
