"""The fixed parameters of the chunked rANS coder, shared by its CPU loops
(:mod:`gpu.compress.chunked_rans`) and its CUDA kernels (:mod:`gpu.compress.chunked_rans_cuda`).

Light: no numba, so the stream layout can be read without the kernels.
"""

from __future__ import annotations

__all__ = ["PROB_BITS", "PROB_SCALE", "STATE_LOWER", "WORD_BITS", "WORD_MASK", "RENORM_SHIFT", "CHUNK",
           "SPARSE_CHUNK", "CHUNK_BYTES", "MAX_RADIUS", "SPAN"]

# Frequencies sum to 2^PROB_BITS: room for all 2 · MAX_RADIUS + 3 symbols at frequency one or more.
PROB_BITS = 15
PROB_SCALE = 1 << PROB_BITS
# The state x stays in [STATE_LOWER, STATE_LOWER · 2^WORD_BITS) = [2^16, 2^32) between symbols
# (Duda 2013, Sec. 4.1; Giesen's ryg_rans), so a symbol moves at most one word in or out.
STATE_LOWER = 1 << 16
WORD_BITS = 16
WORD_MASK = (1 << WORD_BITS) - 1
# A symbol of frequency f is encoded from x < (STATE_LOWER >> PROB_BITS << WORD_BITS) · f = f << RENORM_SHIFT.
RENORM_SHIFT = 16 - PROB_BITS + WORD_BITS
# Symbols per independently coded chunk (the last one of a stream shorter): CHUNK, since a chunk
# is one GPU thread's sequential work and a whole-brain stream needs over ten thousand chunks to
# give the GPU's multiprocessors a few warps each; up to SPARSE_CHUNK where a chunk would code
# fewer than CHUNK_BYTES, since every chunk also stores its final state
# (docs/decisions/compress-rans-chunks.md).
CHUNK = 4096
SPARSE_CHUNK = 65536
CHUNK_BYTES = 1024
# Codes within ±radius are symbols of their own, radius ≤ MAX_RADIUS (as gpu.compress.entropy_coding).
MAX_RADIUS = 4095
# Bins of the histogram of codes clipped to ±(MAX_RADIUS + 1): every radius's symbol counts follow from it.
SPAN = 2 * MAX_RADIUS + 3
