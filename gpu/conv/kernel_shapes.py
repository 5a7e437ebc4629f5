"""Which conv kernels exist: the ranks, shapes and tiles that :mod:`gpu.conv.codegen` can
generate, and their names.

Running code (the planners of :mod:`gpu.conv.cp` and :mod:`gpu.conv.tiling`) needs these
tables to rank launch shapes; it never imports the generator, which runs only when a
kernel is first used (:mod:`gpu.conv.kernel_cache`).
"""

from __future__ import annotations

__all__ = [
    "CP_RANKS",
    "CP_BLOCK",
    "CP_SEP_MAX_BLOCK",
    "CP_LEAN_SHAPES",
    "CP_LEAN_LOW_SHAPES",
    "CP_LEAN_RANKS",
    "cp_lean_shapes",
    "cp_lean_variants",
    "TUCKER_TILES",
    "TUCKER_ROW_KW",
    "TUCKER_ROW_TN",
    "tucker_row_variants",
    "TUCKER_SQUARE_K",
    "tucker_square_variants",
    "square_tile_pitch",
    "cp_taps_name",
    "cp_lean_name",
    "tucker_core_name",
]

#: Ranks with a generated CP kernel (Algorithm 2 and lean separable); larger ranks run as
#: a sum of rank chunks.
CP_RANKS = tuple(range(1, 17))
#: Threads per block of Algorithm 2 (a multiple of 32, so lane groups never straddle warps).
CP_BLOCK = 256
#: Largest block of the separable kernels (the simulator's shuffle scratch row). 512
#: threads failed to launch on the H100 at rank 16: more than 128 registers per thread.
CP_SEP_MAX_BLOCK = 256

#: The lean separable kernels generated, as (rank slices ns, stage-1 pixels px1, stage-4
#: pixels px4), for ranks 9–16: the shapes that were fastest on some Reustle layer in a
#: sweep of 15 (docs/decisions/conv-cp-lean-shapes.md).
CP_LEAN_SHAPES = ((1, 2, 2), (1, 4, 2), (1, 2, 4), (1, 4, 4), (2, 2, 2), (2, 4, 2))
#: The lean shapes at ranks 1–8, where px·R accumulators are few: 8 stage-1 pixels as
#: well (at most 64 accumulators), and two rank slices only where each holds at least 4
#: ranks (rank 8).
CP_LEAN_LOW_SHAPES = ((1, 2, 2), (1, 4, 2), (1, 2, 4), (1, 4, 4), (1, 8, 4), (2, 4, 2))
CP_LEAN_RANKS = CP_RANKS


def cp_lean_shapes(rank: int) -> tuple[tuple[int, int, int], ...]:
    """The (ns, px1, px4) generated for one rank."""
    if rank > 8:
        return CP_LEAN_SHAPES
    return tuple((ns, a, p) for ns, a, p in CP_LEAN_LOW_SHAPES if ns == 1 or rank >= 4 * ns)


def cp_lean_variants() -> tuple[tuple[int, int, int, int], ...]:
    """Every generated lean separable kernel as (rank, ns, px1, px4)."""
    return tuple((r, *shape) for r in CP_LEAN_RANKS for shape in cp_lean_shapes(r))


#: Output-tile shapes (TH, TW) with a generated Tucker core kernel.
TUCKER_TILES = tuple((th, tw) for th in (1, 2, 4, 7, 8) for tw in (1, 2, 4, 7, 8, 16) if th * tw <= 64)
#: Kernel widths with a generated row-register Tucker core kernel (unit horizontal stride
#: and dilation).
TUCKER_ROW_KW = (3, 5)
#: Output channels per thread (TN) of the row-register kernels; TN·TH·TW ≤ 64 accumulators.
#: TN = 4 reads each shared-memory value once per 4·kw multiply–adds.
TUCKER_ROW_TN = (1, 2, 4)


def tucker_row_variants() -> tuple[tuple[int, int, int, int], ...]:
    """Every generated row-register kernel as (TH, TW, kernel width, TN)."""
    return tuple(
        (th, tw, kw, tn) for tn in TUCKER_ROW_TN for kw in TUCKER_ROW_KW for th, tw in TUCKER_TILES
        if tn * th * tw <= 64
    )


#: Kernel sizes k with a generated k×k unit-stride Tucker core kernel.
TUCKER_SQUARE_K = (3,)


def tucker_square_variants() -> tuple[tuple[int, int, int, int], ...]:
    """Every generated k×k unit-stride kernel as (TH, TW, k, TN)."""
    return tuple(
        (th, tw, k, tn) for tn in TUCKER_ROW_TN for k in TUCKER_SQUARE_K for th, tw in TUCKER_TILES
        if tn * th * tw <= 64
    )


def square_tile_pitch(tw: int, k: int) -> int:
    """Floats between the input tile's rows in shared memory for the k×k kernel: the row
    length TW + k − 1 rounded up to 4, so every row starts 16-byte aligned."""
    return -(-(tw + k - 1) // 4) * 4


def cp_taps_name(rank: int) -> str:
    """Name of the generated Algorithm 2 kernel of one rank."""
    return f"cp_conv_r{rank}"


def cp_lean_name(rank: int, ns: int, px1: int, px4: int) -> str:
    """Name of the generated lean separable kernel (rank, ns, px1, px4)."""
    return f"cp_lean_r{rank}_s{ns}_a{px1}_p{px4}"


def tucker_core_name(th: int, tw: int, kh: int, kw: int, tn: int) -> str:
    """Name of the generated Tucker core kernel of a variant (TH, TW, KH, KW, TN) as
    :func:`gpu.conv.tucker.core_kernel_variant` gives it: KH = KW = k for the k×k
    unit-stride kernel, KH = 0 and KW the width for a row-register kernel, both 0 for the
    generic one."""
    if kh:
        return f"tucker_core_{th}x{tw}_k{kh}_n{tn}"
    if kw:
        return f"tucker_core_{th}x{tw}_kw{kw}{'' if tn == 1 else f'_n{tn}'}"
    return f"tucker_core_{th}x{tw}"
