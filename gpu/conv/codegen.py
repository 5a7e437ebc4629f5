"""Source generators for the conv kernels.

Register-resident accumulators need compile-time shapes: the fused CP kernels keep one
scalar per rank (Reustle, Rabbani & Huang, Algorithm 2: "a local vector of length R ...
maintained entirely in a thread's local registers"), the Tucker core kernel one scalar per
output pixel of its TH×TW tile (Xiang et al., Listing 2, ``temp_result[TH][TW]``). numba
keeps scalars in registers but spills indexed local arrays to memory, so the kernels are
written out unrolled, one function per rank, shape or tile.

This module runs only when a kernel is first used: :mod:`gpu.conv.kernel_cache` writes
each kernel's module (:func:`cp_taps_module_source`, :func:`cp_lean_module_source`,
:func:`tucker_core_module_source`) into a cache folder named by a hash of this file and
:mod:`gpu.conv.kernel_shapes`, as a real file that numba's on-disk cache can key on.
"""

from __future__ import annotations

from gpu.conv.kernel_shapes import (CP_BLOCK, CP_SEP_MAX_BLOCK, cp_lean_name, cp_taps_name, square_tile_pitch,
                                    tucker_core_name)

__all__ = [
    "cp_kernel_source",
    "cp_lean_kernel_source",
    "tucker_kernel_source",
    "tucker_rows_kernel_source",
    "tucker_square_kernel_source",
    "cp_taps_module_source",
    "cp_lean_module_source",
    "tucker_core_module_source",
]

_HEADER = '''"""GENERATED at first use by gpu/conv/codegen.py ({what}) into the kernel cache
(gpu/conv/kernel_cache.py); do not edit: the folder is named by a hash of the generator.
"""
# fmt: off
from numba import cuda, float32, int32, uint64

from gpu.cuda.simulator import simulator_active

'''

_LANE_XOR = '''
# The CUDA simulator has no warp shuffles: there the butterfly exchange goes through a
# block-shared scratch row with barriers, which computes the same values.
if simulator_active():
    @cuda.jit(device=True)
    def lane_xor(scratch, tid, value, lane_mask):
        cuda.syncthreads()
        scratch[tid] = value
        cuda.syncthreads()
        return scratch[tid ^ lane_mask]
else:
    @cuda.jit(device=True)
    def lane_xor(scratch, tid, value, lane_mask):
        return cuda.shfl_xor_sync(0xFFFFFFFF, value, lane_mask)

#: Threads per block of Algorithm 2; largest block of the separable kernels (the size of
#: their shuffle scratch row).
CP_BLOCK = {cp_block}
CP_SEP_MAX_BLOCK = {max_block}
'''


def cp_kernel_source(rank: int) -> str:
    """The fused CP kernel for one rank (Reustle, Rabbani & Huang, Algorithm 2).

    Thread layout: ``s_tile`` adjacent lanes share one output pixel (n, y', x') and stride
    over the input channels s (Algorithm 2, line 3). Per channel, p_r = Σ_{h,w}
    U[n,s,y+h,x+w]·H[h,r]·W[w,r] over the taps of the pointer-increment table (Eq. 9 with
    the Hadamard product H∘W precomputed per tap), then q_r += p_r·S[s,r]. The lanes'
    partial q are summed with an xor butterfly of warp shuffles, so every lane holds the
    full q and the T output channels are split across the lanes: V[n,t,y',x'] = bias[t] +
    Σ_r T[t,r]·q_r (Eq. 9, second line).

    The tap weights and the increment table sit in shared memory. Pixels whose receptive
    field lies inside the image skip the bounds tests and take the taps four at a time:
    the four table loads and then the four input loads issue back to back instead of each
    waiting for the previous increment.
    """
    r = range(rank)
    zero_q = "\n".join(f"    q{i} = float32(0.0)" for i in r)
    zero_p = "\n".join(f"            p{i} = float32(0.0)" for i in r)
    acc_p = "\n".join(f"                        p{i} += v * hw_s[kr + {i}]" for i in r)
    acc_p1 = "\n".join(f"                    p{i} += v * hw_s[kr + {i}]" for i in r)
    # one multiply–add per statement: without fastmath a sum expression would not fuse
    acc_p4 = "\n".join(
        f"                    p{i} += v{j} * hw_s[kr + {j * rank + i}]" for j in range(4) for i in r
    )
    acc_q = "\n".join(f"            q{i} += p{i} * s_f[s, {i}]" for i in r)
    shfl = "\n".join(f"        q{i} += lane_xor(scratch, tid, q{i}, m)" for i in r)
    proj = " + ".join(f"q{i} * t_f[t, {i}]" for i in r)
    return f'''
@cuda.jit(cache=True)
def cp_conv_r{rank}(u, out, inc, hw, s_f, t_f, bias, geo, s_tile, accumulate):
    """Fused CP conv, rank {rank}. u, out: flat NCHW; inc: pointer increments (K, 3);
    hw: H∘W per tap, flat (K·{rank}); geo: N, C, H, W, T, Ho, Wo, sh, sw, pt, pl, K,
    (kh−1)·dil_h, (kw−1)·dil_w. Dynamic shared memory: K·{rank} floats, then 3·K ints."""
    hw_s = cuda.shared.array(0, float32)
    inc_s = cuda.shared.array(0, int32)
    scratch = cuda.shared.array(CP_BLOCK, float32)
    tid = cuda.threadIdx.x
    n_img = geo[0]
    chans = geo[1]
    height = geo[2]
    width = geo[3]
    n_out = geo[4]
    out_h = geo[5]
    out_w = geo[6]
    n_taps = geo[11]
    kr_all = n_taps * {rank}
    for i in range(tid, kr_all, cuda.blockDim.x):
        hw_s[i] = hw[i]
    for i in range(tid, n_taps, cuda.blockDim.x):
        inc_s[kr_all + i] = inc[i, 0]
        inc_s[kr_all + n_taps + i] = inc[i, 1]
        inc_s[kr_all + 2 * n_taps + i] = inc[i, 2]
    cuda.syncthreads()
    o_dy = kr_all + n_taps
    o_dx = kr_all + 2 * n_taps
    lane = tid % s_tile
    pix = cuda.blockIdx.x * (cuda.blockDim.x // s_tile) + tid // s_tile
    plane_out = out_h * out_w
    valid = pix < n_img * plane_out
    n = 0
    oy = 0
    ox = 0
{zero_q}
    if valid:
        n = pix // plane_out
        rem = pix - n * plane_out
        oy = rem // out_w
        ox = rem - oy * out_w
        y = oy * geo[7] - geo[9]
        x = ox * geo[8] - geo[10]
        interior = y >= 0 and y + geo[12] < height and x >= 0 and x + geo[13] < width
        ptr = ((n * chans + lane) * height + y) * width + x
        skip = (s_tile - 1) * height * width
        for s in range(lane, chans, s_tile):
{zero_p}
            if interior:
                k = 0
                while k + 4 <= n_taps:
                    a1 = ptr + inc_s[kr_all + k]
                    a2 = a1 + inc_s[kr_all + k + 1]
                    a3 = a2 + inc_s[kr_all + k + 2]
                    v0 = u[ptr]
                    v1 = u[a1]
                    v2 = u[a2]
                    v3 = u[a3]
                    ptr = a3 + inc_s[kr_all + k + 3]
                    kr = k * {rank}
{acc_p4}
                    k += 4
                while k < n_taps:
                    v = u[ptr]
                    kr = k * {rank}
{acc_p1}
                    ptr += inc_s[kr_all + k]
                    k += 1
            else:
                for k in range(n_taps):
                    if y >= 0 and y < height and x >= 0 and x < width:
                        v = u[ptr]
                        kr = k * {rank}
{acc_p}
                    ptr += inc_s[kr_all + k]
                    y += inc_s[o_dy + k]
                    x += inc_s[o_dx + k]
{acc_q}
            ptr += skip
    m = s_tile >> 1
    while m > 0:
{shfl}
        m >>= 1
    if valid:
        base = n * n_out * plane_out + oy * out_w + ox
        for t in range(lane, n_out, s_tile):
            val = bias[t] + {proj}
            if accumulate:
                out[base + t * plane_out] += val
            else:
                out[base + t * plane_out] = val
'''

def _u(v: int) -> str:
    """A uint64 literal (numba types bare integer literals as int64, and uint64 + int64 as float64)."""
    return f"uint64({v})"


def cp_lean_kernel_source(rank: int, ns: int, px1: int, px4: int) -> str:
    """The lean separable fused CP kernel for one rank and thread shape: Reustle, Rabbani &
    Huang's pairwise sequence (Eq. 7: U0 = U ×_S S, U1 = U0 ∗_H H, U2 = U1 ∗_W W,
    V = U2 ×_T T) evaluated inside one kernel per output tile, every intermediate in
    shared memory.

    Per output pixel it costs C·R + R·(kh + kw) + R·T multiply–adds (plus the halo's
    share of the first term) where Algorithm 2 costs C·kh·kw·R + R·T (Eq. 9). One block
    per (output tile TH×TW, image, group of output channels):

    1. A[r,p] = Σ_s S[s,r]·U[n,s,p] for every pixel p of the input tile (output tile plus
       halo; zero outside the image, i.e. the padding), register-blocked like a small
       GEMM: a thread keeps ``px1`` pixels × ⌈R/ns⌉ accumulators, so each S[s,r] it
       loads feeds ``px1`` multiply–adds. The rank is split across ``ns`` threads (S is
       padded with zero columns to ns·⌈R/ns⌉), so the pixel blocking does not multiply
       the registers by the whole rank; threads of one pixel group and lane load the
       same input words (one transaction a warp). ``cs`` adjacent lanes share a pixel
       group and take every cs-th channel, eight input loads per step, the next step's
       issued before this step's multiply–adds; their partial sums meet by a
       warp-shuffle butterfly (as Algorithm 2's channel lanes).
    2. B[r,i,x] = Σ_h H[h,r]·A[r, i·σ_h + h·δ_h, x] for the TH output rows: a thread per
       (r, x) walks the rows, so a warp reads consecutive words.
    3. C[r,i,j] = Σ_w W[w,r]·B[r, i, j·σ_w + w·δ_w], a thread per (r, j), over A, written
       pixel-major at the odd pitch R + 1, so stage 4 loads a pixel's R values at
       constant offsets without bank conflicts.
    4. V[n,t,y,x] = bias[t] + Σ_r T[t,r]·C[r,i,j]: each thread keeps the R values of
       ``px4`` pixels in registers and walks its share of the block's output channels,
       so each T[t,r] it loads feeds ``px4`` multiply–adds; a warp stores consecutive
       pixels.

    Every hot index is ``uint64``: numba adds negative-index wraparound code (a shift, an
    and and an add, 64-bit) to each load through a signed index, which outnumbered the
    multiply–adds of the channel loops; unsigned offsets from one base fold into the load
    instruction. The taps of the 1-D passes step through shared memory by one constant
    increment (δ·row length, δ): Tillet's pointer-increment table of a one-dimensional
    filter has a single distinct row, so no table is loaded.
    """
    rq = -(-rank // ns)
    rp = rq * ns
    ri = range(rq)
    p1 = range(px1)
    p4 = range(px4)
    nl = max(1, 8 // px1)
    pitch = rank + 1
    zero_a = "\n".join(f"        a{k}_{i} = float32(0.0)" for k in p1 for i in ri)
    locate = []
    for k in p1:
        locate += [
            f"        e{k} = g + {k} * n_pg" if k else "        e0 = g",
            f"        row = e{k} // w_in",
            "        iy = iy0 + row",
            f"        ix = ix0 + e{k} - row * w_in",
            f"        in{k} = e{k} < p_in and iy >= 0 and iy < height and ix >= 0 and ix < width",
            f"        pt{k} = uint64(plane0 + min(max(iy, 0), height - 1) * width + min(max(ix, 0), width - 1))",
        ]
    locate = "\n".join(locate)

    def madd(c: int, indent: str) -> list[str]:
        lines = []
        for i in ri:
            off = "" if c == 0 else f" + ss{c}"
            lines.append(f"{indent}sv = s_f[sr{off}{'' if i == 0 else f' + {_u(i)}'}]")
            lines += [f"{indent}a{k}_{i} += d{c}_{k} * sv" for k in p1]
        return lines

    steps = "\n".join(f"    st{c} = {_u(c)} * step\n    ss{c} = {_u(c)} * srs" for c in range(1, nl))
    fetch = [f"f{c}_{k} = u[pt{k}{'' if c == 0 else f' + st{c}'}]" for c in range(nl) for k in p1]
    fetch0 = "\n".join(f"                {line}" for line in fetch)
    fetch_next = "\n".join(f"                    {line}" for line in fetch)
    zero_f = "\n".join(f"            f{c}_{k} = float32(0.0)" for c in range(nl) for k in p1)
    take = "\n".join(f"                d{c}_{k} = f{c}_{k}" for c in range(nl) for k in p1)
    acc_n = "\n".join(line for c in range(nl) for line in madd(c, "                "))
    load1 = "\n".join(f"                d0_{k} = u[pt{k}]" for k in p1)
    acc1 = "\n".join(madd(0, "                "))
    step_n = "\n".join(f"                pt{k} += st_n" for k in p1)
    step1 = "\n".join(f"                pt{k} += step" for k in p1)
    shfl = "\n".join(f"            a{k}_{i} += lane_xor(scratch, tid, a{k}_{i}, m)" for k in p1 for i in ri)
    def park_rank(k: int, i: int, value: str) -> list[str]:
        # ranks past R in the last slice (S padded with zeros) are not stored
        dst = f"sm[ea{'' if i == 0 else f' + {_u(i)} * p_in_u'}] = {value}"
        if rp > rank:
            return [f"                    if {i} < nr:", f"                        {dst}"]
        return [f"                    {dst}"]

    park = []
    for k in p1:
        park += [f"            if e{k} < p_in:", f"                ea = uint64(e{k}) + ra", f"                if in{k}:"]
        park += [line for i in ri for line in park_rank(k, i, f"a{k}_{i}")]
        park += ["                else:"]
        park += [line for i in ri for line in park_rank(k, i, "float32(0.0)")]
    park = "\n".join(park)
    pix = []
    for k in p4:
        pix += [
            f"            p{k} = base + tl{'' if k == 0 else f' + {k} * span'}",
            f"            ok{k} = False",
            f"            o{k} = uint64(0)",
            f"            c{k} = uint64(0)",
            f"            if p{k} < p_out:",
            f"                i = p{k} // tw",
            "                oy = oy0 + i",
            f"                ox = ox0 + p{k} - i * tw",
            f"                ok{k} = oy < out_h and ox < out_w",
            f"                o{k} = uint64(oy * out_w + ox)",
            f"                c{k} = uint64(p{k} * {pitch})",
        ]
    pix = "\n".join(pix)
    loadq = "\n".join(f"            q{k}_{i} = sm[c{k}{'' if i == 0 else f' + {_u(i)}'}]" for k in p4 for i in range(rank))
    loadw = "\n".join(f"                w{i} = t_f[tr{'' if i == 0 else f' + {_u(i)}'}]" for i in range(rank))
    fma = "\n".join(
        [f"                v{k} = b" for k in p4] + [f"                v{k} += q{k}_{i} * w{i}" for i in range(rank) for k in p4]
    )
    store = "\n".join(
        f"""                if ok{k}:
                    if accumulate:
                        out[ob + o{k}] += v{k}
                    else:
                        out[ob + o{k}] = v{k}"""
        for k in p4
    )
    padded = f", zero beyond rank {rank}" if rp > rank else ""
    return f'''
@cuda.jit(cache=True)
def cp_lean_r{rank}_s{ns}_a{px1}_p{px4}(u, out, s_f, h_f, w_f, t_f, bias, geo, accumulate):
    """Separable fused CP conv, rank {rank}, unsigned indexing: stage 1 with {ns} rank
    slice(s) of {rq} and {px1} pixels a thread, stage 4 with {px4} pixels a thread.
    s_f: S flat row-major with {rp} columns{padded}; other arguments as cp_sep_r{rank}_p*.
    Dynamic shared memory: max({rank}·P_in, {pitch}·P_out) + {rank}·TH·W_in floats."""
    sm = cuda.shared.array(0, float32)
    scratch = cuda.shared.array(CP_SEP_MAX_BLOCK, float32)
    tid = cuda.threadIdx.x
    n_thr = cuda.blockDim.x
    chans = geo[1]
    height = geo[2]
    width = geo[3]
    n_out = geo[4]
    out_h = geo[5]
    out_w = geo[6]
    th = geo[15]
    tw = geo[16]
    w_in = geo[19]
    cs = geo[20]
    p_in = geo[18] * w_in
    p_out = th * tw
    p_in_u = uint64(p_in)
    n = cuda.blockIdx.x // geo[0]
    tile = cuda.blockIdx.x - n * geo[0]
    ty = tile // geo[17]
    oy0 = ty * th
    ox0 = (tile - ty * geo[17]) * tw
    iy0 = oy0 * geo[7] - geo[9]
    ix0 = ox0 * geo[8] - geo[10]
    # stage 1: A[r, p] = Σ_s S[s, r]·U[n, s, p]; thread tid is lane j < cs of rank slice
    # sl1 < {ns} of pixel group g, and takes the pixels g + k·n_pg (k < {px1}), ranks
    # sl1·{rq} ... sl1·{rq} + {rq - 1}. Unsigned indices: no negative-index wraparound code.
    step = uint64(cs * height * width)
    srs = uint64(cs * {rp})
    st_n = {_u(nl)} * step
{steps}
    j = tid % cs
    sl1 = (tid // cs) % {ns}
    ra = uint64(sl1 * {rq}) * p_in_u
    nr = {rank} - sl1 * {rq}
    n_pg = (p_in + {px1 - 1}) // {px1}
    plane0 = (n * chans + j) * height * width
    for base in range(0, cs * {ns} * n_pg, n_thr):
        g = (base + tid) // (cs * {ns})
{zero_a}
{locate}
        if g < n_pg:
            sr = uint64(j * {rp} + sl1 * {rq})
            s = j
{zero_f}
            if s + {nl - 1} * cs < chans:
{fetch0}
            while s + {nl - 1} * cs < chans:
{take}
{step_n}
                s += {nl} * cs
                if s + {nl - 1} * cs < chans:
{fetch_next}
{acc_n}
                sr += {_u(nl)} * srs
            while s < chans:
{load1}
{acc1}
{step1}
                sr += srs
                s += cs
        m = cs >> 1
        while m > 0:
{shfl}
            m >>= 1
        if j == 0 and g < n_pg:
{park}
    cuda.syncthreads()
    # stage 2: B[r, i, x] = Σ_h H[h, r]·A[r, i·σ_h + h·δ_h, x], after A and C
    row_h = uint64(geo[7] * w_in)
    tap_h = uint64(geo[13] * w_in)
    w_in_u = uint64(w_in)
    b_size = uint64(th * w_in)
    b0 = uint64(max({rank} * p_in, {pitch} * p_out))
    rank_u = {_u(rank)}
    n_h = geo[11]
    for idx in range(tid, {rank} * w_in, n_thr):
        r = idx // w_in
        x = idx - r * w_in
        first = uint64(r * p_in + x)
        dst = b0 + uint64(r) * b_size + uint64(x)
        for i in range(th):
            src = first
            acc = float32(0.0)
            hr = uint64(r)
            for h in range(n_h):
                acc += h_f[hr] * sm[src]
                src += tap_h
                hr += rank_u
            sm[dst] = acc
            first += row_h
            dst += w_in_u
    cuda.syncthreads()
    # stage 3: C[(i·TW + j)·{pitch} + r] = Σ_w W[w, r]·B[r, i, j·σ_w + w·δ_w], over A: pixel
    # major, so stage 4 reads a pixel's ranks at constant offsets ({pitch}: an odd pitch,
    # no bank conflicts)
    col_w = uint64(geo[8])
    tap_w = uint64(geo[14])
    c_row = uint64(tw * {pitch})
    n_w = geo[12]
    for idx in range(tid, {rank} * tw, n_thr):
        r = idx // tw
        jx = idx - r * tw
        first = b0 + uint64(r) * b_size + uint64(jx) * col_w
        dst = uint64(jx * {pitch} + r)
        for i in range(th):
            src = first
            acc = float32(0.0)
            wr = uint64(r)
            for w in range(n_w):
                acc += w_f[wr] * sm[src]
                src += tap_w
                wr += rank_u
            sm[dst] = acc
            first += w_in_u
            dst += c_row
    cuda.syncthreads()
    # stage 4: V[n, t, p] = bias[t] + Σ_r T[t, r]·C[r, p], {px4} pixels per thread
    span = geo[22]
    n_sl = geo[23]
    sl = tid // span
    tl = tid - sl * span
    t_lo = cuda.blockIdx.y * geo[21]
    t_hi = min(n_out, t_lo + geo[21])
    plane_out = out_h * out_w
    if sl < n_sl:
        base = 0
        while base < p_out:
{pix}
{loadq}
            for t in range(t_lo + sl, t_hi, n_sl):
                tr = uint64(t * {rank})
{loadw}
                b = bias[uint64(t)]
{fma}
                ob = uint64((n * n_out + t) * plane_out)
{store}
            base += {px4} * span
'''


def _tucker_staging_stride(th: int, tw: int) -> int:
    """Floats per thread in the shared staging area: TH·TW rounded up to an odd number, so
    that the threads' rows fall in different banks."""
    return th * tw | 1


def _tucker_prologue(th: int, tn: int = 1, pitch: int | None = None, unroll: int | None = None) -> str:
    """Block coordinates and the copy of the block's input tile into shared memory.

    The copy steps its rows and source address by fixed increments instead of dividing
    each index (Tillet's pointer increments): 64-bit integer division costs tens of
    instructions on the GPU and the copy runs once per element. Each thread keeps one column of the tile and takes ``_COPY_UNROLL`` of its rows per
    pass, issuing their global loads before any shared store, so that many loads are in
    flight: one element at a time, a thread waited a whole global-memory latency per
    element (the fitted ``copy_latency`` of :mod:`gpu.conv.tiling`), and a flat element
    index cost about 50 instructions per element to step and bounds-test; for 32 output
    channels the copy issued as many instructions as the multiply–adds.

    ``pitch``: floats between the tile's rows in shared memory if not the row length
    (a compile-time pitch lets the kernel read rows with vector loads); ``unroll``: rows
    a thread copies per pass (default ``_COPY_UNROLL``).
    """
    copy_body = _tile_copy_body(unroll or _COPY_UNROLL)
    row_pitch = "tile_w_in" if pitch is None else str(pitch)
    return f'''    tile = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    chans = geo[0]
    height = geo[1]
    width = geo[2]
    n_out = geo[3]
    out_h = geo[4]
    out_w = geo[5]
    n_taps = geo[10]
    tile_h_in = geo[11]
    tile_w_in = geo[12]
    plane = tile_h_in * tile_w_in
    n_thr = cuda.blockDim.x // split
    part = tid // n_thr
    bx = cuda.blockIdx.x
    ty0 = (bx // tiles_w) * {th}
    tx0 = (bx - (bx // tiles_w) * tiles_w) * TW_
    c0 = cuda.blockIdx.y * tile_c
    img = cuda.blockIdx.z // n_groups
    n0 = (cuda.blockIdx.z - img * n_groups) * n_thr{'' if tn == 1 else f' * {tn}'}
    nch = n0 + tid - part * n_thr
    count = min(tile_c, chans - c0)
    iy0 = ty0 * geo[6] - geo[8]
    ix0 = tx0 * geo[7] - geo[9]
    zb = (img * chans + c0) * height * width
    step = cuda.blockDim.x
    # thread = (tile row, column): rpp rows per pass, the columns of a row on consecutive
    # threads (coalesced); blocks have at least tile_w_in threads (see conv_tiling)
    rpp = step // tile_w_in
    x_lane = tid - (tid // tile_w_in) * tile_w_in
    row = tid // tile_w_in
    rows = count * tile_h_in
    if row >= rpp:
        row = rows
    ix = ix0 + x_lane
    col_in = ix >= 0 and ix < width
    rows_in = iy0 >= 0 and iy0 + tile_h_in <= height
    ch = row // tile_h_in
    yy = row - ch * tile_h_in
    s_c = rpp // tile_h_in
    s_y = rpp - s_c * tile_h_in
    src = zb + (ch * height + iy0 + yy) * width + ix
    d_src = (s_c * height + s_y) * width
    wrap_y = (height - tile_h_in) * width
    dst = row * {row_pitch} + x_lane
    d_dst = rpp * {row_pitch}
    while row < rows:
{copy_body}
    cuda.syncthreads()
    if nch >= n_out:
        count = 0
'''


#: Tile elements a thread copies per pass of the prologue, loads before stores.
_COPY_UNROLL = 4


def _tile_copy_body(unroll: int = _COPY_UNROLL) -> str:
    """One pass of the tile copy: ``_COPY_UNROLL`` tile rows row + u·rpp of the thread's
    column. Row and source address advance by fixed increments, with a correction when
    the row wraps to the next channel (Tillet's pointer increments: no multiplication or
    division per element); the column's bounds test is hoisted out of the loop, the row's
    is skipped for blocks whose input rows all lie inside the image. The loads are issued
    before the stores."""
    lines = []
    for u in range(unroll):
        guard = "" if u == 0 else f"row + {u} * rpp < rows and "
        lines += [
            "        iy = iy0 + yy",
            f"        ok{u} = {guard}col_in and (rows_in or (iy >= 0 and iy < height))",
            f"        src{u} = src",
        ]
        if u < unroll - 1:
            lines += [
                "        src += d_src",
                "        yy += s_y",
                "        if yy >= tile_h_in:",
                "            yy -= tile_h_in",
                "            src += wrap_y",
            ]
    for u in range(unroll):
        lines += [f"        v{u} = float32(0.0)", f"        if ok{u}:", f"            v{u} = z[uint64(src{u})]"]
    lines.append("        tile[uint64(dst)] = v0")
    for u in range(1, unroll):
        lines += [f"        if row + {u} * rpp < rows:", f"            tile[uint64(dst + {u} * d_dst)] = v{u}"]
    lines += [
        "        src += d_src",
        "        yy += s_y",
        "        if yy >= tile_h_in:",
        "            yy -= tile_h_in",
        "            src += wrap_y",
        f"        row += {unroll} * rpp",
        f"        dst += {unroll} * d_dst",
    ]
    return "\n".join(lines)


def _acc(t: int, i: int, j: int) -> str:
    """Name of the accumulator of output channel slot t, tile row i, column j."""
    return f"a{i}_{j}" if t == 0 else f"a{t}_{i}_{j}"


def _tucker_epilogue(th: int, tw: int, tn: int = 1) -> str:
    """Sum the ``split`` channel slices of the block and store the output tile.

    Every thread parks its TN·TH·TW accumulators in shared memory (the input tile is no
    longer needed), slot t of slice p at row (p·TN + t)·n_thr + lane; the block then walks
    (output channel, pixel) with the pixel fastest, so the stores of a warp are runs of TW
    consecutive addresses instead of one address per output channel H·W apart. Blocks that
    own one of several channel tiles add atomically (Listing 2, line 29).
    """
    cells = [(i, j) for i in range(th) for j in range(tw)]
    stride = _tucker_staging_stride(th, tw)
    park = []
    for t in range(tn):
        row = "part * " + f"{tn - 1} * n_thr + tid" if tn > 1 else "tid"
        park.append(f"    sb = ({row}{'' if t == 0 else f' + {t} * n_thr'}) * {stride}")
        park += [f"    tile[sb + {i * tw + j}] = {_acc(t, i, j)}" for i, j in cells]
    park = "\n".join(park)
    return f'''    cuda.syncthreads()
{park}
    cuda.syncthreads()
    part_step = n_thr * {tn * stride}
    for k in range(tid, n_thr * {tn * th * tw}, step):
        ln = k // {th * tw}
        cell = k - ln * {th * tw}
        oy = ty0 + cell // {tw}
        ox = tx0 + cell - (cell // {tw}) * {tw}
        if n0 + ln < n_out and oy < out_h and ox < out_w:
            sp = ln * {stride} + cell
            val = tile[sp]
            for p in range(1, split):
                sp += part_step
                val += tile[sp]
            dst = ((img * n_out + n0 + ln) * out_h + oy) * out_w + ox
            if atomic:
                cuda.atomic.add(out, dst, val)
            else:
                out[dst] = val
'''


_TUCKER_ARGS = "z, out, wk, taps, geo, tile_c, tiles_w, n_groups, atomic, split"

_TUCKER_ARGS_DOC = """z, out: flat NCHW; wk: kernel CRSN, flat;
    taps: shared-memory tap offsets (K,); geo: C, H, W, N, Ho, Wo, sh, sw, pt, pl, K,
    tile_h_in, tile_w_in, dil_h, kh, channel stride of wk (N padded). The block is ``split`` slices of n_thr threads; slice
    p takes the channels p, p + split, ... of the block's TC. Dynamic shared memory:
    max(TC·tile_h_in·tile_w_in, blockDim·TN·{stride}) floats."""


def tucker_kernel_source(th: int, tw: int) -> str:
    """The Tucker core conv kernel for one output tile TH×TW (Xiang et al., Listing 2).

    One thread block per (TH×TW output tile, TC input channels, image, group of output
    channels); it first copies the (TH−1)·stride + (R−1)·dil + 1 by (TW−1)·stride +
    (S−1)·dil + 1 input tile of its TC channels into shared memory once (one barrier, no
    per-channel synchronisation), then each thread owns one output channel n and keeps
    TH·TW accumulators in registers: Y(n,th,tw) = Σ_{{c<TC,r,s}} I(c, th·stride + r·dil,
    tw·stride + s·dil)·K(c,r,s,n), the kernel in CRSN layout so that the threads' weight
    loads coalesce. The output-centric loop computes the same sums as the listing's
    input-centric scatter with compile-time accumulator indices. The taps come from a
    table of shared-memory offsets (Tillet).

    Beyond the listing, the block may hold ``split`` slices of threads per output channel
    that share the input tile and take every split-th channel, summed in shared memory at
    the end: few output channels still fill a block, and a channel reduction needs neither
    atomics nor a zero-fill of the output (see :func:`_tucker_epilogue`).
    """
    cells = [(i, j) for i in range(th) for j in range(tw)]
    zero = "\n".join(f"    a{i}_{j} = float32(0.0)" for i, j in cells)
    fma = "\n".join(
        f"            a{i}_{j} += tile[o{'' if i == 0 else f' + {i} * row_step'}{'' if j == 0 else f' + {j} * col_step'}] * wv"
        for i, j in cells
    )
    doc = _TUCKER_ARGS_DOC.format(stride=_tucker_staging_stride(th, tw))
    return f'''
@cuda.jit(cache=True)
def tucker_core_{th}x{tw}({_TUCKER_ARGS}):
    """Tucker core conv, {th}x{tw} output tile. {doc}"""
{_tucker_prologue(th).replace("TW_", str(tw))}    row_step = geo[6] * tile_w_in
    col_step = geo[7]
    n_w = geo[15]
{zero}
    for c in range(part, count, split):
        cb = c * plane
        wb = (c0 + c) * n_taps * n_w + nch
        for k in range(n_taps):
            wv = wk[wb + k * n_w]
            o = cb + taps[k]
{fma}
{_tucker_epilogue(th, tw)}'''


def tucker_rows_kernel_source(th: int, tw: int, kw: int, tn: int = 1) -> str:
    """The Tucker core kernel specialised for kernel width ``kw``, horizontal stride and
    dilation 1 (the common case; other shapes use :func:`tucker_kernel_source`).

    Same blocks, shared tile, channel slices and thread-per-output-channel layout (Xiang
    et al., Listing 2); the inner loop runs over (channel, kernel row): the kw weights of
    the row go to registers, and for each of the TH output rows the TW + kw − 1 input
    values the row needs are read from shared memory once and feed TW·kw multiply–adds,
    instead of one shared-memory read per multiply–add. Shared-memory indices are unsigned
    so no negative-index wraparound is computed.

    With ``tn`` > 1 each thread also owns the output channels nch + t·n_thr (t < TN): every
    input value read from shared memory then feeds TN·kw multiply–adds per output, which
    matters once the shared-memory pipe, not the FMA units, limits the kernel (large
    feature maps, few output channels). The (channel, kernel row) loop is flattened and
    software-pipelined: the weights of the next iteration are loaded into registers before
    the current iteration's multiply–adds, so a thread no longer waits a global-memory
    latency per iteration. The weights are padded with zero output channels
    to a multiple of TN·n_thr (geo[15] is their channel stride), so no slot reads past them.
    """
    cells = [(i, j) for i in range(th) for j in range(tw)]
    zero = "\n".join(f"    {_acc(t, i, j)} = float32(0.0)" for t in range(tn) for i, j in cells)
    names = [(f"{'' if t == 0 else f'{t}_'}{s}", f"{s} * n_w{'' if t == 0 else f' + {t} * n_thr'}")
             for t in range(tn) for s in range(kw)]
    first = "\n".join(f"        p{n} = wk[uint64(wr + {off})]" for n, off in names)
    take = "\n".join(f"        w{n} = p{n}" for n, _ in names)
    fetch = "\n".join(f"            p{n} = wk[uint64(wr + {off})]" for n, off in names)
    rows = []
    for i in range(th):
        rows.append(f"        rb = uint64(crow + {i} * row_step)" if i else "        rb = uint64(crow)")
        for j in range(tw + kw - 1):
            rows.append(f"        v{j} = tile[rb + uint64({j})]")
        for t in range(tn):
            for s in range(kw):
                for j in range(tw):
                    rows.append(f"        {_acc(t, i, j)} += v{j + s} * w{'' if t == 0 else f'{t}_'}{s}")
    body = "\n".join(rows)
    doc = _TUCKER_ARGS_DOC.format(stride=_tucker_staging_stride(th, tw))
    suffix = "" if tn == 1 else f"_n{tn}"
    return f'''
@cuda.jit(cache=True)
def tucker_core_{th}x{tw}_kw{kw}{suffix}({_TUCKER_ARGS}):
    """Tucker core conv, {th}x{tw} output tile, {tn} output channel(s) per thread, kernel
    width {kw}, unit horizontal stride and dilation. {doc}"""
{_tucker_prologue(th, tn).replace("TW_", str(tw))}    row_step = geo[6] * tile_w_in
    dil_step = geo[13] * tile_w_in
    n_rows = geo[14]
    n_w = geo[15]
{zero}
    # one iteration per (channel of this slice, kernel row); the next iteration's weights
    # are loaded before this one's multiply–adds, so their latency hides behind them
    n_iter = 0
    if count > part:
        n_iter = (count - part + split - 1) // split * n_rows
    wr = (c0 + part) * n_taps * n_w + nch
    cr = part * plane
    skip_w = (split - 1) * n_taps * n_w
    skip_c = split * plane - n_rows * dil_step
    r = 0
    if n_iter > 0:
{first}
    for it in range(n_iter):
{take}
        crow = cr
        r += 1
        wr += {kw} * n_w
        cr += dil_step
        if r == n_rows:
            r = 0
            wr += skip_w
            cr += skip_c
        if it + 1 < n_iter:
{fetch}
{body}
{_tucker_epilogue(th, tw, tn)}'''


#: Copy passes of the k×k kernel: 8 loads in flight a thread (the block's whole tile is
#: copied before any multiply–add, and on the large maps all blocks copy at once).
_SQUARE_COPY_UNROLL = 8


def tucker_square_kernel_source(th: int, tw: int, k: int, tn: int = 1) -> str:
    """The Tucker core kernel for a k×k kernel with unit stride and dilation in both
    directions (the TDC shapes), where the input tile's geometry is known at compile time:
    TH + k − 1 rows of TW + k − 1 floats a channel, at a pitch that keeps every row 16-byte
    aligned (:func:`square_tile_pitch`), so that each shared-memory read is a constant
    offset from one base address and the compiler merges a row's reads into vector loads.

    Same blocks, channel slices, TN output channels per thread and epilogue as
    :func:`tucker_rows_kernel_source` (Xiang et al., Listing 2), but one loop iteration per
    input channel instead of per (channel, kernel row): each of the TH + k − 1 input rows
    of the channel is read from shared memory once and feeds every (output row i, kernel
    row r) with i + r equal to it, so a channel reads (TH + k − 1)·(TW + k − 1) values
    where the row kernel reads TH·k·(TW + k − 1), and the loop bookkeeping and prefetch
    test run once a channel instead of k times. All k·k·TN weights of the next channel are
    loaded into registers before this channel's multiply–adds.

    Weights: the plan stores them warp-interleaved, W[group, c, L // 32, e, L % 32] for
    thread L of a slice and e = (r·k + s)·TN + t (output channel n0 + t·n_thr + L), so the
    32 threads of a row load 128 consecutive bytes and one thread's k·k·TN weights of a
    channel lie at constant offsets e·32 from one index (Tillet's pointer increments: one
    64-bit addition a channel instead of one per weight).
    """
    cells = [(i, j) for i in range(th) for j in range(tw)]
    twi = tw + k - 1
    pitch = square_tile_pitch(tw, k)
    plane = (th + k - 1) * pitch
    n_e = k * k * tn
    zero = "\n".join(f"    {_acc(t, i, j)} = float32(0.0)" for t in range(tn) for i, j in cells)
    names = [(f"{t}_{r}_{s}", ((r * k + s) * tn + t) * 32) for t in range(tn) for r in range(k) for s in range(k)]
    first = "\n".join(f"        p{n} = wk[wr + uint64({off})]" for n, off in names)
    take = "\n".join(f"        w{n} = p{n}" for n, _ in names)
    fetch = "\n".join(f"            p{n} = wk[wr + uint64({off})]" for n, off in names)
    rows = []
    for y in range(th + k - 1):
        rows += [f"        v{j} = tile[cr + uint64({y * pitch + j})]" for j in range(twi)]
        for r in range(k):
            if 0 <= y - r < th:
                rows += [f"        {_acc(t, y - r, j)} += v{j + s} * w{t}_{r}_{s}"
                         for t in range(tn) for s in range(k) for j in range(tw)]
    body = "\n".join(rows)
    doc = _TUCKER_ARGS_DOC.format(stride=_tucker_staging_stride(th, tw))
    prologue = _tucker_prologue(th, tn, pitch, _SQUARE_COPY_UNROLL).replace("TW_", str(tw))
    return f'''
@cuda.jit(cache=True)
def tucker_core_{th}x{tw}_k{k}_n{tn}({_TUCKER_ARGS}):
    """Tucker core conv, {th}x{tw} output tile, {tn} output channel(s) per thread, {k}x{k}
    kernel, unit stride and dilation (input tile {th + k - 1}x{twi} at pitch {pitch}). {doc}
    wk here is warp-interleaved (see gpu.conv.codegen.tucker_square_kernel_source)."""
{prologue}{zero}
    # one iteration per channel of this slice; the next channel's weights are loaded
    # before this one's multiply–adds, so their latency hides behind them
    n_ch = 0
    if count > part:
        n_ch = (count - part + split - 1) // split
    lane = tid - part * n_thr
    n_ws = (n_thr + 31) // 32
    grp = cuda.blockIdx.z - img * n_groups
    wr = uint64((((grp * chans + c0 + part) * n_ws + lane // 32) * {n_e}) * 32 + lane % 32)
    w_step = uint64(split * n_ws * {n_e * 32})
    cr = uint64(part * {plane})
    c_step = uint64(split * {plane})
    if n_ch > 0:
{first}
    for ci in range(n_ch):
{take}
        if ci + 1 < n_ch:
            wr += w_step
{fetch}
{body}
        cr += c_step
{_tucker_epilogue(th, tw, tn)}'''


def _cp_module(what: str, kernel: str) -> str:
    return _HEADER.format(what=what) + _LANE_XOR.format(cp_block=CP_BLOCK, max_block=CP_SEP_MAX_BLOCK) + kernel


def cp_taps_module_source(rank: int) -> str:
    """The module of :func:`cp_kernel_source` (Algorithm 2) for one rank."""
    return _cp_module(f"Algorithm 2 CP conv kernel {cp_taps_name(rank)}", cp_kernel_source(rank))


def cp_lean_module_source(rank: int, ns: int, px1: int, px4: int) -> str:
    """The module of :func:`cp_lean_kernel_source` for one rank and thread shape."""
    return _cp_module(f"lean separable CP conv kernel {cp_lean_name(rank, ns, px1, px4)}",
                      cp_lean_kernel_source(rank, ns, px1, px4))


def tucker_core_module_source(th: int, tw: int, kh: int, kw: int, tn: int) -> str:
    """The module of one Tucker core kernel, the variant (TH, TW, KH, KW, TN) as
    :func:`gpu.conv.kernel_shapes.tucker_core_name` reads it."""
    if kh:
        kernel = tucker_square_kernel_source(th, tw, kh, tn)
    elif kw:
        kernel = tucker_rows_kernel_source(th, tw, kw, tn)
    else:
        kernel = tucker_kernel_source(th, tw)
    return _HEADER.format(what=f"Tucker core conv kernel {tucker_core_name(th, tw, kh, kw, tn)}") + kernel
