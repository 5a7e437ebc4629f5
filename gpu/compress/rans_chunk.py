"""One chunk's rANS coding, the steps both backends of :mod:`gpu.compress.chunked_rans` run
(a ``prange`` iteration on the CPU, a thread on the GPU: :mod:`gpu.compress.chunked_rans_cuda`),
so that they write and read the same bytes by construction. Integers are int64 throughout.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from gpu.compress.rans_parameters import PROB_BITS, PROB_SCALE, RENORM_SHIFT, STATE_LOWER, WORD_BITS, WORD_MASK

__all__ = ["encode_chunk", "decode_chunk", "state_divmod"]


@register_jitable
def state_divmod(x, f):  # pragma: no cover - compiled
    """``(x // f, x % f)`` for a state ``0 ≤ x < 2^32`` and a frequency ``1 ≤ f ≤ 2^15``, by
    a float64 product with ``1/f``: a 64-bit integer division is a long instruction sequence
    on the GPU, and each symbol's state waits for the last one's. The product is within
    2^-20 of ``x / f``, whose fraction is 0 or at least 2^-15, so its floor is the quotient or,
    where ``x`` is a multiple of ``f``, one less, which the remainder's check puts right."""
    q = np.int64(np.float64(x) * (1.0 / np.float64(f)))
    r = x - q * f
    if r >= f:
        q += 1
        r -= f
    return q, r


@register_jitable
def encode_chunk(codes, lo, hi, radius, freq, start, regions, end):  # pragma: no cover - compiled
    """Code ``codes[lo:hi]`` backwards from the state ``STATE_LOWER``, its words written
    backwards ending at ``regions[end]`` (the decoder reads them forwards), the final state's
    two words last: ``(words written, escape symbols coded)``."""
    top = 2 * radius + 2
    pos = end
    x = np.int64(STATE_LOWER)
    count = 0
    for i in range(hi - 1, lo - 1, -1):
        code = np.int64(codes[i])
        if code < -radius:
            s = 0
            count += 1
        elif code > radius:
            s = top
            count += 1
        else:
            s = code + radius + 1
        f = np.int64(freq[s])
        if x >= f << RENORM_SHIFT:
            pos -= 1
            regions[pos] = x & WORD_MASK
            x >>= WORD_BITS
        q, r = state_divmod(x, f)
        x = (q << PROB_BITS) + r + np.int64(start[s])
    regions[pos - 1] = x >> WORD_BITS
    regions[pos - 2] = x & WORD_MASK
    return end - (pos - 2), count


@register_jitable
def decode_chunk(words, p, end, lut, freq, start, radius, lo, hi, out):  # pragma: no cover - compiled
    """Decode ``out[lo:hi]`` from ``words[p:end]`` (codes; an escape symbol as ±(radius + 1)):
    ``(escape symbols decoded, whether the chunk failed its check)`` — a chunk must end at
    the state ``STATE_LOWER`` with all its words read."""
    x = np.int64(words[p]) | (np.int64(words[p + 1]) << WORD_BITS)
    p += 2
    top = 2 * radius + 2
    count = 0
    for i in range(lo, hi):
        slot = x & (PROB_SCALE - 1)
        s = np.int64(lut[slot])
        x = np.int64(freq[s]) * (x >> PROB_BITS) + slot - np.int64(start[s])
        if x < STATE_LOWER:
            if p == end:
                return count, True
            x = (x << WORD_BITS) | np.int64(words[p])
            p += 1
        out[i] = s - radius - 1
        if s == 0 or s == top:
            count += 1
    return count, x != STATE_LOWER or p != end
