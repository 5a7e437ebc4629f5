"""CUDA backend of FMLS segmentation, as four kernels (docs/decisions/fixels-fmls-phases.md).

:func:`fmls_sample_cuda` samples the FODs on the 1281 directions in float64, into global memory,
with each voxel's largest sample (each entry of the SH → amplitude matrix it loads serves four
voxels, each coefficient four directions). :func:`fmls_grow_cuda`, a warp per voxel, VOXELS
voxels a block: each warp gathers its voxel's positive samples as 32-bit sort keys
(:func:`_sort_key`: the amplitude in fixed point, relative to the voxel's largest, above the
direction) and sorts them: a bitonic sort of the keys, then an
insertion sort of the runs whose fixed-point amplitudes tie, by the float64 amplitudes
(largest amplitude first, equal amplitudes by index: the sweep's order). A word a direction
then holds what the sweep reads (:func:`_order`, :func:`_rank`, :func:`_label`): the direction
at that position of the sorted samples, and the direction's own position and label, so that
one shared-memory read tells whether a neighbour comes earlier in the sweep and which lobe
took it. The sweep of :func:`gpu.fixels.fmls_math.grow_lobes` goes 32 samples at a time
(:func:`_sweep`): a lane takes a sample once every neighbour earlier in the sweep has its
label, so a chunk resolves in as many rounds as its longest chain of neighbours; seeds are
numbered in sweep order when the chunk is done. Each lobe's integral and mean then add its
samples in the sweep's order, as the sequential sweep adds them, so the sums are the CPU
backend's to the bit: the sorted samples go 32 at a time again, and each lane adds those of
its lobes (:func:`_lobe_sums`). A voxel where two lobes would merge (``lobe_merge_ratio`` < 1)
runs the sequential sweep on one lane instead. The kernel writes the lobes to global memory
with a work list of them. :func:`fmls_refine_cuda`, a thread per lobe of any voxel (full
warps), runs the Newton peak search (:func:`gpu.fixels.fmls_math.refine_lobe`);
:func:`fmls_write_cuda`, a thread per voxel, writes the fixels. Every floating-point
reduction is sequential within a thread, so the output does not depend on scheduling (the
work list's order does, each lobe's result does not). A voxel that seeds more than MAX_LOBES
lobes answers LOBE_OVERFLOW and is redone on the CPU.

Only ``cuda.syncthreads`` and its predicate forms synchronise the lanes (numba's CUDA
simulator, where the tests run these kernels, has no warp shuffles or votes); every loop
around a barrier runs alike in the block's warps.
"""

from __future__ import annotations

import math

from numba import config, cuda, float64, int16, int32, int64, uint32, uint64

from gpu.fixels import fmls_math as fm
from gpu.fixels.fmls_tables import MAX_NEIGHBOURS
from gpu.fixels.kernel_layout import FIRST_NEWTON_STEPS, MAX_LOBES, N_DIRS, SAMPLE_VOXELS, VOXELS, WARP

__all__ = ["fmls_sample_cuda", "fmls_grow_cuda", "fmls_refine_cuda", "fmls_refine_more_cuda", "fmls_write_cuda",
           "widen_rows_cuda"]

_MAX_COEFFS = 91  # lmax 12
_MAX_LEGENDRE = 49  # (12/2 + 1)²
# a register cap on the Newton kernel: more threads in flight outweigh its spills
# (docs/decisions/fixels-fmls-phases.md); the simulator takes no such option
_REFINE_OPTIONS = {"cache": True} if config.ENABLE_CUDASIM else {"cache": True, "max_registers": 64}
# and on the grow kernel: 64 registers a thread leave 16 blocks an SM, as many as its shared memory
_GROW_OPTIONS = {"cache": True} if config.ENABLE_CUDASIM else {"cache": True, "max_registers": 64}
# a lobe seeded in the sweep's current 32 samples, numbered after the sweep's lobes by lane
_PROVISIONAL = 64
#: Fixed-point levels of a sort key's amplitude (21 bits, above the direction's 11); the
#: tests lower them in the simulator, so that many keys tie
_KEY_LEVELS = 1 << 21
# Indices, loop counters and offsets are uint64, never mixed with a signed int (numba types
# uint64 with int64 as float64): numba makes a signed index a wraparound test, a signed range
# loop a count with sign fix-ups and a signed // or % a floor division with sign fix-ups;
# unsigned, they are plain address arithmetic, and // or % by a power of two a shift or a mask.
# Labels, lobe numbers of the sweep and −1 sentinels can be negative and stay signed.
_0 = uint64(0)
_1 = uint64(1)
_2 = uint64(2)
_4 = uint64(4)
_W = uint64(WARP)
_DIRS = uint64(N_DIRS)
_P = uint64(_PROVISIONAL)
# the sums' groups of samples: lobes 0…63, then the pending samples
_GROUPS = _PROVISIONAL + 1
# the sums' staged samples of a voxel: a warp's, by chunk parity
_TWO_WARPS = 2 * WARP
# The grow kernel's word a direction (uint32): bits 0–10 the direction at this position of the
# sorted positive samples, 11–21 this direction's position as _TOP_RANK − position (0: not
# positive, never reached by the sweep, so "earlier in the sweep" is "larger"), 22–29 its
# label + _LABEL_BIAS (the sweep's labels lie in −97…95).
_FIELD = uint64(0x7FF)
_RANK_SHIFT = uint64(11)
_TOP_RANK = uint64(0x7FF)
_LABEL_SHIFT = uint64(22)
_LABEL_BIAS = 128
_NO_LABEL = uint64((_LABEL_BIAS - 1) << 22)
_KEEP_BUT_LABEL = uint64(0xFFFFFFFF ^ (0xFF << 22))


@cuda.jit(device=True)
def _sort_key(value, scale, levels, d):
    """The key of positive sample d of amplitude ``value``: its fixed-point amplitude q =
    ⌊value · scale⌋ (below ``levels``; scale = levels ÷ the voxel's largest amplitude) as
    levels − 1 − q above the direction, so that the keys ascend as the sweep goes (larger
    amplitude first, equal ones by index) wherever the q differ. q is monotonic in value, so
    the keys' order is the sweep's but within runs of equal q."""
    q = min(uint64(value * scale), levels - _1)
    return ((levels - _1 - q) << _RANK_SHIFT) | d


@cuda.jit(device=True)
def _order(word):
    """The direction at a word's position of the sorted samples (also a sort key's direction)."""
    return uint64(word) & _FIELD


@cuda.jit(device=True)
def _rank(word):
    """_TOP_RANK − the position of a word's direction in the sweep; 0 if it is not positive."""
    return (uint64(word) >> _RANK_SHIFT) & _FIELD


@cuda.jit(device=True)
def _label(word):
    """The label of a word's direction (signed, as :func:`gpu.fixels.fmls_math.grow_lobes`'s)."""
    return int64((uint64(word) >> _LABEL_SHIFT) & uint64(0xFF)) - _LABEL_BIAS


@cuda.jit(device=True)
def _set_label(words, d, lobe):
    """Direction d of ``words`` labelled ``lobe`` (int64), its other fields kept."""
    words[d] = (uint64(words[d]) & _KEEP_BUT_LABEL) | (uint64(lobe + _LABEL_BIAS) << _LABEL_SHIFT)


@cuda.jit(device=True)
def _set_order(words, k, d):
    """Direction d at position k of ``words``' sorted samples, the other fields kept."""
    words[k] = (uint64(words[k]) & ~_FIELD) | d


@cuda.jit(device=True)
def _sweeps_first(row, a, b):
    """Does sample a come before sample b in the sweep (float64 amplitudes ``row``): larger
    amplitude, or equal and lower index."""
    return row[a] > row[b] or (row[a] == row[b] and a < b)


@cuda.jit(device=True)
def _sort_tied_runs(keys, n, row, lane):
    """Each run of the bitonically sorted ``keys[:n]`` whose fixed-point amplitudes tie (in it
    by direction) put into the sweep's order by the float64 amplitudes ``row``: an insertion
    sort a run, on the lane whose stride holds its first position (runs are short; their
    keys' amplitudes, which the lanes compare, never change)."""
    k = lane
    while k + _1 < n:
        level = uint64(keys[k]) >> _RANK_SHIFT
        if uint64(keys[k + _1]) >> _RANK_SHIFT == level and (k == _0 or uint64(keys[k - _1]) >> _RANK_SHIFT != level):
            j = k + _1
            while j < n and uint64(keys[j]) >> _RANK_SHIFT == level:
                key = keys[j]
                i = j
                while i > k and _sweeps_first(row, _order(key), _order(keys[i - _1])):
                    keys[i] = keys[i - _1]
                    i -= _1
                keys[i] = key
                j += _1
        k += _W


@cuda.jit(device=True)
def _negative_first(row, top, deepest, first, lane):
    """MRtrix3 sweeps by |amplitude|, so a voxel whose sweep would reach a non-positive sample
    before its largest positive one, ``top`` at direction ``first``, has no lobe: is that so
    (``deepest``: the largest magnitude of its non-positive samples ``row``)? Where the two
    magnitudes are equal the lower direction comes first; the lane looks at its stride."""
    if deepest != top:
        return deepest > top
    d = lane
    while d < first:
        if row[d] == -top:
            return True
        d += _W
    return False


@cuda.jit(device=True)
def _grow_block(coeffs, unit, neighbours, weights, merge_ratio, counts, samples, extremes, g_label, staged,
                words, peak_value, g_integral, g_mean, head, seed, next_peak, state, lanes, members):
    """Everything up to the lobes of the block's voxels (shared arrays as :func:`fmls_grow_cuda`
    declares them; ``samples`` and ``extremes`` as :func:`fmls_sample_cuda` wrote them; the
    lobes' integrals and mean sums go to g_integral and g_mean, and peak_value, head, seed and
    next_peak are the global (V, MAX_LOBES) arrays, as :func:`fmls_grow_cuda` says; a voxel
    whose lobes merge gets its labels in g_label here): counts[v] is 0, or LOBE_OVERFLOW;
    state[w] says whether voxel w has lobes (state[w, 0] = 1) and how many (state[w, 2]),
    state[w, 3] whether they merged."""
    t = uint64(cuda.threadIdx.x)
    w = t // _W
    lane = t % _W
    v = uint64(cuda.blockIdx.x) * uint64(VOXELS) + w
    n_voxels = uint64(coeffs.shape[0])
    n_coeffs = uint64(coeffs.shape[1])
    # read here, not as a module constant: the tests lower it in the simulator
    levels = uint64(_KEY_LEVELS)
    # the warp's rows, once (a voxel past the last reads none of its row)
    keys = words[w]
    row = samples[min(v, n_voxels - _1)]
    if lane == _0:
        ok = v < n_voxels
        if ok:
            ok = coeffs[v, 0] > 0.0
            c = _0
            while c < n_coeffs:
                ok = ok and math.isfinite(coeffs[v, c])
                c += _1
        state[w, 0] = 1 if ok else 0
        state[w, 1] = 0
        state[w, 2] = 0
        if v < n_voxels:
            counts[v] = 0
    cuda.syncthreads()

    # the positive samples as sort keys, gathered in any order (the sort fixes it)
    top = extremes[min(v, n_voxels - _1), 0]
    if state[w, 0] == 1 and top > 0.0:
        scale = float64(levels) / top
        # below ~1e-302 the largest sample would make it infinite (and its products' conversion
        # to integers undefined): then every key ties, and the float64 order decides
        if not math.isfinite(scale):
            scale = 0.0
        d = lane
        while d < _DIRS:
            value = row[d]
            if value > 0.0:
                keys[uint64(cuda.atomic.add(state, (w, _1), 1))] = _sort_key(value, scale, levels, d)
            d += _W
    cuda.syncthreads()
    largest_n = _1
    for u in range(VOXELS):
        if uint64(state[u, 1]) > largest_n:
            largest_n = uint64(state[u, 1])
    size = _1
    while size < largest_n:
        size *= _2
    # bitonic sort of keys[:n], in the form whose compare-exchanges all put the smaller key
    # first: padded to a power of two with keys above every other, the padding never moves,
    # so it is neither stored nor compared. The same steps in every warp.
    n = uint64(state[w, 1])
    block = _2
    while block <= size:
        stride = block // _2
        while stride > _0:
            i = lane
            while i < size // _2:
                lo = _2 * i - (i & (stride - _1))
                # a block's first step compares mirror images, the later ones halves
                hi = lo + stride if stride < block // _2 else \
                    lo - (lo & (block - _1)) + block - _1 - (lo & (block - _1))
                if hi < n:
                    a = keys[lo]
                    b = keys[hi]
                    if b < a:
                        keys[lo] = b
                        keys[hi] = a
                i += _W
            cuda.syncthreads()
            stride //= _2
        block *= _2
    _sort_tied_runs(keys, n, row, lane)
    cuda.syncthreads()

    if state[w, 0] == 1 and (n == _0 or _negative_first(row, top, extremes[v, 1], _order(keys[0]), lane)):
        state[w, 0] = 0
    cuda.syncthreads()
    # the words the sweep reads: the direction at each position, each direction's position
    # and its label (none yet)
    k = lane
    while k < _DIRS:
        keys[k] = (_order(keys[k]) if k < n else _0) | _NO_LABEL
        k += _W
    cuda.syncthreads()
    k = lane
    while k < n:
        cuda.atomic.or_(words, (w, _order(keys[k])), (_TOP_RANK - k) << _RANK_SHIFT)
        k += _W
    cuda.syncthreads()

    _sweep(samples, words, unit, neighbours, weights, merge_ratio, peak_value, g_integral, g_mean, head, seed,
           next_peak, state, lanes, members, staged)
    if lane == _0 and state[w, 0] == 1 and state[w, 3] != 0:
        # a merge: the sweep again from the start, sequentially, as the CPU runs it, on the
        # sorted directions (the words cut to them) with the labels in g_label
        k = _0
        while k < n:
            keys[k] = _order(keys[k])
            k += _1
        adjacent = cuda.local.array(MAX_NEIGHBOURS, int32)
        tail = cuda.local.array(MAX_LOBES, int16)
        # room for MAX_LOBES lobes (the global rows' length; the tests shrink MAX_LOBES)
        n_lobes = fm.grow_lobes(row, keys, state[w, 1], unit, neighbours, weights, merge_ratio, g_label[v], adjacent,
                                peak_value[v, :MAX_LOBES], g_mean[v], g_integral[v], head[v], tail, seed[v],
                                next_peak[v])
        state[w, 2] = n_lobes
    if lane == _0 and state[w, 0] == 1 and state[w, 2] < 0:
        counts[v] = fm.LOBE_OVERFLOW
        state[w, 0] = 0
    cuda.syncthreads()


@cuda.jit(device=True)
def _sweep(samples, words, unit, neighbours, weights, merge_ratio, peak_value, g_integral, g_mean, head, seed,
           next_peak, state, lanes, members, staged):
    """:func:`gpu.fixels.fmls_math.grow_lobes` of each warp's voxel, its lanes taking the sorted
    positive samples 32 at a time (the module docstring says how); state[w, 2] receives the
    lobe count (LOBE_OVERFLOW when more than MAX_LOBES), state[w, 3] is set when two lobes
    would merge, and then nothing else is written (the caller redoes the voxel sequentially).
    ``words`` as :func:`_grow_block` leaves them; the values kept come from ``samples``. The
    lobes' integrals and mean sums go straight to g_integral[v] and g_mean[v]; ``staged`` is
    the block's coefficient array, free once the samples are taken (:func:`_lobe_sums`)."""
    t = uint64(cuda.threadIdx.x)
    w = t // _W
    lane = t % _W
    v = uint64(cuda.blockIdx.x) * uint64(VOXELS) + w
    word = words[w]
    row = samples[min(v, uint64(samples.shape[0]) - _1)]
    # read here, not as a module constant: the tests shrink MAX_LOBES in the simulator
    max_lobes = uint64(MAX_LOBES)
    if lane == _0:
        state[w, 2] = 0
        state[w, 3] = 0
    chunks = _0
    for u in range(VOXELS):
        if state[u, 0] == 1:
            chunks = max(chunks, (uint64(state[u, 1]) + _W - _1) // _W)
    cuda.syncthreads()
    n_lobes = _0
    merging = False
    chunk = _0
    while chunk < chunks:
        k = chunk * _W + lane
        active = state[w, 0] == 1 and not merging and n_lobes <= max_lobes and k < uint64(state[w, 1])
        d = _order(word[k]) if active else _0
        value = row[d] if active else 0.0
        place = _TOP_RANK - k
        resolved = not active
        merge = False
        is_seed = False
        lanes[w, 0, lane] = 0
        # the neighbours earlier in the sweep (−1 for the others), once a chunk: registers
        earlier = cuda.local.array(MAX_NEIGHBOURS, int32)
        for j in range(MAX_NEIGHBOURS):
            nb = neighbours[d, j] if active else -1
            earlier[j] = nb if nb >= 0 and _rank(word[uint64(max(nb, 0))]) > place else -1
        # rounds until every lane's earlier neighbours are resolved (a lane waits on lower lanes only)
        while True:
            if not resolved:
                wait = False
                lo = _PROVISIONAL + WARP
                hi = -1
                for j in range(MAX_NEIGHBOURS):
                    if earlier[j] < 0:
                        continue
                    lobe = _label(word[uint64(earlier[j])])
                    if lobe == -1:
                        wait = True
                    elif lobe >= 0:
                        lo = min(lo, lobe)
                        hi = max(hi, lobe)
                if not wait:
                    resolved = True
                    if hi < 0:
                        _set_label(word, d, int64(_P + lane))
                        lanes[w, 0, lane] = 1
                        is_seed = True
                    elif lo == hi:
                        _set_label(word, d, lo)
                    else:
                        if hi >= _PROVISIONAL:
                            top = row[_order(word[chunk * _W + uint64(hi - _PROVISIONAL)])]
                        else:
                            top = peak_value[v, uint64(hi)]
                        merge = value / top > merge_ratio
                        _set_label(word, d, -2 - lo)
            if cuda.syncthreads_and(1 if resolved else 0):
                break
        if merge:
            state[w, 3] = 1
        any_seed = cuda.syncthreads_count(1 if is_seed else 0) > 0
        # read between two barriers: lanes decide alike whether the next chunk runs
        merging = state[w, 3] != 0
        if any_seed:
            # provisional lobes (this chunk's seeds, by lane) take their numbers in sweep order
            rank = _0
            seeds = _0
            j = _0
            while j < _W:
                if j < lane:
                    rank += uint64(lanes[w, 0, j])
                seeds += uint64(lanes[w, 0, j])
                j += _1
            lanes[w, 1, lane] = n_lobes + rank
            cuda.syncthreads()
            if active:
                lobe = _label(word[d])
                if lobe >= _PROVISIONAL:
                    _set_label(word, d, int64(lanes[w, 1, uint64(lobe - _PROVISIONAL)]))
                elif -2 - lobe >= _PROVISIONAL:
                    _set_label(word, d, -2 - int64(lanes[w, 1, uint64(-2 - lobe - _PROVISIONAL)]))
                if is_seed and n_lobes + rank < max_lobes:
                    new = n_lobes + rank
                    peak_value[v, new] = value
                    seed[v, new] = d
                    head[v, new] = new
                    next_peak[v, new] = -1
            n_lobes += seeds
            cuda.syncthreads()
        chunk += _1
    ok = state[w, 0] == 1 and not merging and n_lobes <= max_lobes
    if lane == _0 and state[w, 0] == 1 and not merging and not ok:
        state[w, 2] = fm.LOBE_OVERFLOW

    _lobe_sums(samples, words, unit, weights, g_integral, g_mean, state, lanes, members, staged,
               uint64(state[w, 1]) if ok else _0, chunks)
    if ok and lane == _0:
        state[w, 2] = n_lobes


@cuda.jit(device=True)
def _cleared(members, w, lane, buffer):
    """Buffer ``buffer`` of warp w's member words cleared by the warp's lanes; returns it."""
    g = lane
    while g <= _P:
        members[w, buffer, g] = 0
        g += _W
    return buffer


@cuda.jit(device=True)
def _publish(members, lanes, staged, w, lane, parity, buffer, d, value, group):
    """The lane's sample (direction d, amplitude ``value``) published to the warp for a chunk
    of the sums: its direction and value by lane and chunk parity, its bit in its group's
    member word of ``buffer``."""
    lanes[w, parity, lane] = d
    staged[w, parity * _W + lane] = value
    cuda.atomic.or_(members, (w, buffer, group), uint32(_1 << lane))


@cuda.jit(device=True)
def _lobe_sums(samples, words, unit, weights, g_integral, g_mean, state, lanes, members, staged, n, chunks):
    """Each lobe's integral and mean sum of warp w's voxel, from its n sorted samples (0: none;
    ``words`` as :func:`_grow_block` leaves them), into g_integral[v] and g_mean[v]: as
    grow_lobes adds them, the samples the lobe took in sweep order, then the pending ones
    assigned to it, in sweep order (their labels then set). Lane l sums lobes l and l + 32.
    The samples go 32 at a time: each lane publishes its sample's direction in lanes[w,
    parity of the chunk] (a chunk's writes cannot reach the last one's reads) and sets its
    bit in members[w, b, its group] (b: the chunk's of three buffers, one being cleared, one
    written and read, one still read; group L a sample lobe L took, _PROVISIONAL a pending
    one in the first pass, L one pending for lobe L in the second), then adds those of its
    lobes in lane order; the pending samples are queued at the front of the sorted directions
    (read already) and added after. No list of each lobe's samples is kept: it would take 2.5
    KB more shared memory a voxel. Beside its direction a lane stages its sample's value from
    ``samples`` in staged[w, 32·parity + lane], so that the sums read shared memory, not
    global. ``chunks`` is as many as the block's largest n needs (every warp meets the same
    barriers); state[w, 4] receives the number of pending samples."""
    t = uint64(cuda.threadIdx.x)
    w = t // _W
    lane = t % _W
    v = uint64(cuda.blockIdx.x) * uint64(VOXELS) + w
    word = words[w]
    row = samples[min(v, uint64(samples.shape[0]) - _1)]
    # the lane's two lobes
    mine = lane
    other = lane + _W
    below = (_1 << lane) - _1
    # each lobe's mean sum, integral, and whether its seed (its first sample) is in
    mx, my, mz, m_total, m_seeded = 0.0, 0.0, 0.0, 0.0, False
    ox, oy, oz, o_total, o_seeded = 0.0, 0.0, 0.0, 0.0, False
    buffer = _cleared(members, w, lane, _0)
    cuda.syncthreads()
    pending = _0
    chunk = _0
    while chunk < chunks:
        k = chunk * _W + lane
        parity = chunk % _2
        # the next chunk's buffer, last read two chunks ago, before the last barrier
        after = _cleared(members, w, lane, buffer + _1 if buffer < _2 else _0)
        d = _0
        lobe = int64(-1)
        if k < n:
            d = _order(word[k])
            lobe = _label(word[d])
            _publish(members, lanes, staged, w, lane, parity, buffer, d, row[d], uint64(lobe) if lobe >= 0 else _P)
        cuda.syncthreads()
        taken_mine = uint64(members[w, buffer, mine])
        taken_other = uint64(members[w, buffer, other])
        queued = uint64(members[w, buffer, _P])
        # the queue's writes stay below this chunk's end, which every lane read before the barrier
        if k < n and lobe < 0:
            _set_order(word, pending + uint64(cuda.popc(queued & below)), d)
        pending += uint64(cuda.popc(queued))
        # a lobe's samples of the chunk, in sweep order (lowest bit first)
        while taken_mine != _0:
            j = uint64(cuda.ffs(taken_mine)) - _1
            taken_mine &= taken_mine - _1
            d = uint64(lanes[w, parity, j])
            mx, my, mz, m_total = _lobe_add(d, staged[w, parity * _W + j], weights[d], unit, m_seeded, mx, my, mz,
                                            m_total)
            m_seeded = True
        while taken_other != _0:
            j = uint64(cuda.ffs(taken_other)) - _1
            taken_other &= taken_other - _1
            d = uint64(lanes[w, parity, j])
            ox, oy, oz, o_total = _lobe_add(d, staged[w, parity * _W + j], weights[d], unit, o_seeded, ox, oy, oz,
                                            o_total)
            o_seeded = True
        buffer = after
        chunk += _1
    # the queues' lengths, for as many chunks of them in every warp; the barrier also puts
    # the queue's last writes before its reads
    if lane == _0:
        state[w, 4] = pending
    cuda.syncthreads()
    queue_chunks = _0
    for u in range(VOXELS):
        queue_chunks = max(queue_chunks, (uint64(state[u, 4]) + _W - _1) // _W)
    chunk = _0
    while chunk < queue_chunks:
        k = chunk * _W + lane
        parity = chunk % _2
        after = _cleared(members, w, lane, buffer + _1 if buffer < _2 else _0)
        if k < pending:
            d = _order(word[k])
            _publish(members, lanes, staged, w, lane, parity, buffer, d, row[d], uint64(-2 - _label(word[d])))
        cuda.syncthreads()
        queued_mine = uint64(members[w, buffer, mine])
        queued_other = uint64(members[w, buffer, other])
        while queued_mine != _0:
            j = uint64(cuda.ffs(queued_mine)) - _1
            queued_mine &= queued_mine - _1
            d = uint64(lanes[w, parity, j])
            mx, my, mz, m_total = _lobe_add(d, staged[w, parity * _W + j], weights[d], unit, True, mx, my, mz, m_total)
            _set_label(word, d, int64(mine))
        while queued_other != _0:
            j = uint64(cuda.ffs(queued_other)) - _1
            queued_other &= queued_other - _1
            d = uint64(lanes[w, parity, j])
            ox, oy, oz, o_total = _lobe_add(d, staged[w, parity * _W + j], weights[d], unit, True, ox, oy, oz, o_total)
            _set_label(word, d, int64(other))
        buffer = after
        chunk += _1
    if m_seeded:
        g_mean[v, lane, 0] = mx
        g_mean[v, lane, 1] = my
        g_mean[v, lane, 2] = mz
        g_integral[v, lane] = m_total
    if o_seeded:
        g_mean[v, lane + _W, 0] = ox
        g_mean[v, lane + _W, 1] = oy
        g_mean[v, lane + _W, 2] = oz
        g_integral[v, lane + _W] = o_total


@cuda.jit(device=True)
def _lobe_add(d, value, weight, unit, seeded, mx, my, mz, total):
    """A lobe's mean sum and integral with sample d added, as grow_lobes adds it: the seed
    (``seeded`` false) starts them."""
    if not seeded:
        return unit[d, 0] * value * weight, unit[d, 1] * value * weight, unit[d, 2] * value * weight, \
            abs(value * weight)
    # grow_lobes adds unit·side·|value|·weight; a sign flip is exact, so the products are
    # formed before the side is known, off the chain of additions
    px = unit[d, 0] * abs(value) * weight
    py = unit[d, 1] * abs(value) * weight
    pz = unit[d, 2] * abs(value) * weight
    if mx * unit[d, 0] + my * unit[d, 1] + mz * unit[d, 2] > 0.0:
        mx += px
        my += py
        mz += pz
    else:
        mx -= px
        my -= py
        mz -= pz
    return mx, my, mz, total + abs(value * weight)


@cuda.jit(cache=True)
def fmls_sample_cuda(coeffs, amp_from_sh, samples, extremes):
    """samples[v, d] = Σ_c amp_from_sh[c, d] · coeffs[v, c], added in coefficient order as the
    CPU backend adds them, and extremes[v] = (the largest sample, the largest magnitude of a
    non-positive one; 0 where none, and a NaN enters neither: such a voxel has no lobes), for
    SAMPLE_VOXELS voxels a block of SAMPLE_VOXELS·8 threads: a warp takes four of them, a lane
    four directions 32 apart of each 128, so that each of the matrix's entries it loads serves
    four voxels and each coefficient four directions (a register tile; the matrix's reads,
    from L2, go to SAMPLE_VOXELS voxels at once)."""
    t = uint64(cuda.threadIdx.x)
    w = t // _W
    lane = t % _W
    first = uint64(cuda.blockIdx.x) * uint64(SAMPLE_VOXELS)
    n_voxels = uint64(coeffs.shape[0])
    n_coeffs = uint64(coeffs.shape[1])
    sh = cuda.shared.array((SAMPLE_VOXELS, _MAX_COEFFS), float64)
    block_extremes = cuda.shared.array((SAMPLE_VOXELS, 2), float64)
    i = t
    while i < uint64(SAMPLE_VOXELS) * n_coeffs:
        u = i // n_coeffs
        c = i % n_coeffs
        sh[u, c] = coeffs[first + u, c] if first + u < n_voxels else 0.0
        i += uint64(cuda.blockDim.x)
    if t < uint64(SAMPLE_VOXELS):
        block_extremes[t, 0] = 0.0
        block_extremes[t, 1] = 0.0
    cuda.syncthreads()
    mine = w * _4
    total = cuda.local.array((4, 4), float64)
    largest = cuda.local.array(4, float64)
    deepest = cuda.local.array(4, float64)
    m = cuda.local.array((4, 4), float64)
    for u in range(4):
        largest[u] = 0.0
        deepest[u] = 0.0
    tile = _0
    while tile < _DIRS:
        for u in range(4):
            for k in range(4):
                total[u, k] = 0.0
        # four coefficients' entries loaded before they are used, so that sixteen reads (from
        # L2: the matrix outgrows L1) are in flight at once
        c = _0
        while c < n_coeffs:
            for e in range(4):
                for k in range(4):
                    d = tile + lane + _W * uint64(k)
                    m[e, k] = amp_from_sh[c + uint64(e), d] if d < _DIRS and c + uint64(e) < n_coeffs else 0.0
            for e in range(4):
                if c + uint64(e) < n_coeffs:
                    for u in range(4):
                        value = sh[mine + uint64(u), c + uint64(e)]
                        for k in range(4):
                            total[u, k] += m[e, k] * value
            c += _4
        for u in range(4):
            v = first + mine + uint64(u)
            for k in range(4):
                d = tile + lane + _W * uint64(k)
                if d < _DIRS and v < n_voxels:
                    samples[v, d] = total[u, k]
                    if total[u, k] > largest[u]:
                        largest[u] = total[u, k]
                    if -total[u, k] > deepest[u]:
                        deepest[u] = -total[u, k]
        tile += _4 * _W
    for u in range(4):
        cuda.atomic.max(block_extremes, (mine + uint64(u), 0), largest[u])
        cuda.atomic.max(block_extremes, (mine + uint64(u), 1), deepest[u])
    cuda.syncthreads()
    if t < uint64(SAMPLE_VOXELS) and first + t < n_voxels:
        extremes[first + t, 0] = block_extremes[t, 0]
        extremes[first + t, 1] = block_extremes[t, 1]


@cuda.jit(**_GROW_OPTIONS)
def fmls_grow_cuda(coeffs, unit, neighbours, weights, merge_ratio, counts, lobes, work, n_work, g_label, samples,
                   extremes, g_peak_value, g_integral, g_mean, g_head, g_seed, g_next_peak):
    """The lobes of voxels VOXELS·blockIdx.x + warp, launched with VOXELS·32 threads a block,
    from their samples (V, D) and extremes (V, 2) as :func:`fmls_sample_cuda` wrote them:
    lobes[v] receives their number (0: none, counts[v] then final), the g_ arrays (V,
    MAX_LOBES[, 3]) and g_label (V, D) what :func:`fmls_refine_cuda` and
    :func:`fmls_write_cuda` read, and work[n_work[0]…] voxel·MAX_LOBES + lobe for each lobe
    (voxels in any order). The lobes (peak values, integrals, mean sums, heads, seeds, next
    peaks) are written to the g_ arrays directly, not staged in shared memory: a voxel whose
    sequential sweep overflows may leave some there."""
    t = uint64(cuda.threadIdx.x)
    w = t // _W
    lane = t % _W
    v = uint64(cuda.blockIdx.x) * uint64(VOXELS) + w
    # the sums' samples, 32 a lane by chunk parity (:func:`_lobe_sums`)
    staged = cuda.shared.array((VOXELS, _TWO_WARPS), float64)
    # a word a direction (the module's _FIELD etc. say what it holds): first the sort keys,
    # then what the sweep reads; the float64 samples stay in global memory (V, D), read for
    # the values the sums add and where two keys tie, which leaves 3.8 KB less a voxel and
    # more blocks an SM
    words = cuda.shared.array((VOXELS, N_DIRS), uint32)
    state = cuda.shared.array((VOXELS, 5), int32)
    # a word from each lane to the others: in the sweep, whether its sample seeded a lobe [0]
    # and the lobe's number [1]; in the sums, its sample's direction, by chunk parity
    lanes = cuda.shared.array((VOXELS, 2, WARP), int32)
    # in the sums, the lanes whose samples each lobe takes (and the pending ones), by chunk
    members = cuda.shared.array((VOXELS, 3, _GROUPS), uint32)
    _grow_block(coeffs, unit, neighbours, weights, merge_ratio, counts, samples, extremes, g_label, staged, words,
                g_peak_value, g_integral, g_mean, g_head, g_seed, g_next_peak, state, lanes, members)
    if v >= uint64(coeffs.shape[0]):
        return
    # a voxel with lobes has a count ≥ 0 (an overflow cleared its state[w, 0])
    n = uint64(state[w, 2]) if state[w, 0] == 1 else _0
    if lane == _0:
        lobes[v] = n
        if n > _0:
            first = uint64(cuda.atomic.add(n_work, 0, int32(n)))
            lobe = _0
            while lobe < n:
                work[first + lobe] = v * uint64(MAX_LOBES) + lobe
                lobe += _1
    # a voxel whose lobes merged has its labels there already
    if n == _0 or state[w, 3] != 0:
        return
    d = lane
    while d < _DIRS:
        g_label[v, d] = _label(words[w, d])
        d += _W


@cuda.jit(device=True)
def _listed_lobe(items, i):
    """The voxel and lobe of item i of a lobe list (voxel·MAX_LOBES + lobe; MAX_LOBES a power
    of two: a shift and a mask), the lobe signed, as refine_lobe compares it with labels
    (below MAX_LOBES: no wraparound test)."""
    item = uint64(items[i])
    return item // uint64(MAX_LOBES), int64(item % uint64(MAX_LOBES))


@cuda.jit(**_REFINE_OPTIONS)
def fmls_refine_cuda(coeffs, lmax, unit, neighbours, legendre, step, factors, integral_threshold, work, n_work,
                     more, n_more, label, peak_value, integral, head, seed, next_peak, peak_dir):
    """:func:`gpu.fixels.fmls_math.refine_lobe` of lobe work[i] (as :func:`fmls_grow_cuda`
    wrote it) on thread i, for i < n_work[0]: a thread a lobe of any voxel, for its first
    FIRST_NEWTON_STEPS Newton steps. A lobe still climbing then leaves its direction in
    peak_dir and joins ``more`` (n_more[0] counts them) for :func:`fmls_refine_more_cuda`, so
    that a warp waits for its slowest lane's first steps only."""
    i = uint64(cuda.grid(1))
    if i >= uint64(n_work[0]):
        return
    v, lobe = _listed_lobe(work, i)
    d0 = fm.refine_start(lobe, integral_threshold, unit, integral[v], head[v], seed[v], peak_dir[v])
    if d0 < 0:
        return
    al = cuda.local.array(_MAX_LEGENDRE, float64)
    done, value, x, y, z = fm.sh_peak_steps(coeffs[v], lmax, unit[d0, 0], unit[d0, 1], unit[d0, 2],
                                            FIRST_NEWTON_STEPS, legendre, step, factors, al[:legendre.shape[1]])
    if done:
        fm.refine_end(lobe, d0, value, x, y, z, unit, neighbours, label[v], peak_value[v], head[v], seed[v],
                      next_peak[v], peak_dir[v])
        return
    peak_dir[v, lobe, 0] = x
    peak_dir[v, lobe, 1] = y
    peak_dir[v, lobe, 2] = z
    more[uint64(cuda.atomic.add(n_more, 0, 1))] = work[i]


@cuda.jit(**_REFINE_OPTIONS)
def fmls_refine_more_cuda(coeffs, lmax, unit, neighbours, legendre, step, factors, more, n_more, label, peak_value,
                          head, seed, next_peak, peak_dir):
    """The Newton steps after the first FIRST_NEWTON_STEPS of lobe more[i] on thread i, for
    i < n_more[0], from the direction :func:`fmls_refine_cuda` left in peak_dir (which gets
    the seed direction back, as refine_lobe leaves it for a peak not kept); then the rest of
    :func:`gpu.fixels.fmls_math.refine_lobe`. The same steps as one uninterrupted climb."""
    i = uint64(cuda.grid(1))
    if i >= uint64(n_more[0]):
        return
    v, lobe = _listed_lobe(more, i)
    d0 = seed[v, head[v, lobe]]
    x = peak_dir[v, lobe, 0]
    y = peak_dir[v, lobe, 1]
    z = peak_dir[v, lobe, 2]
    for c in range(3):
        peak_dir[v, lobe, c] = unit[d0, c]
    al = cuda.local.array(_MAX_LEGENDRE, float64)
    done, value, x, y, z = fm.sh_peak_steps(coeffs[v], lmax, x, y, z, fm.NEWTON_ITERATIONS - FIRST_NEWTON_STEPS,
                                            legendre, step, factors, al[:legendre.shape[1]])
    if done:
        fm.refine_end(lobe, d0, value, x, y, z, unit, neighbours, label[v], peak_value[v], head[v], seed[v],
                      next_peak[v], peak_dir[v])


@cuda.jit(cache=True)
def fmls_write_cuda(lobes, integral_threshold, peak_threshold, maxnum, dir_from_peak, peak_value, mean, integral, head,
                    peak_dir, counts, out_dir, out_afd, out_peak):
    """:func:`gpu.fixels.fmls_math.write_fixels` of voxel v on thread v, from the lobes
    :func:`fmls_refine_cuda` refined (voxels without lobes keep their count)."""
    v = uint64(cuda.grid(1))
    if v >= uint64(lobes.shape[0]) or lobes[v] == 0:
        return
    counts[v] = fm.write_fixels(uint64(lobes[v]), integral_threshold, peak_threshold, maxnum, dir_from_peak,
                                peak_value[v], mean[v], integral[v], head[v], peak_dir[v], out_dir[v], out_afd[v],
                                out_peak[v])


@cuda.jit(cache=True)
def widen_rows_cuda(block, coefficient_major, rows):
    """rows[v, c] = coefficient c of voxel v in ``block`` as float64: block[c, v] if
    ``coefficient_major``, else block[v, c] (a float32 image's coefficients widen exactly, as
    the CPU backend widens them)."""
    i = cuda.grid(1)
    n = rows.shape[0]
    if i < n * rows.shape[1]:
        v = i % n
        c = i // n
        rows[v, c] = block[c, v] if coefficient_major else block[v, c]
