"""The ``cp-conv`` and ``tucker-conv`` job kinds: a conv layer in factorized form applied to
an input.

Inputs: ``input`` (.npy (N, C, H, W) or NIfTI, see :mod:`worker.io.conv_arrays`) and either
``factors`` (.npz in the family's layout) or ``kernel`` (a dense (T, C, kh, kw) .npy, which
is decomposed first at the rank given in the parameters). Outputs: the layer's output
(``output.npy``, or ``output.nii.gz`` on the input's grid for a NIfTI input) and a JSON
sidecar ``conv.json``. The CLI (``fibertensor conv cp|tucker``) calls :func:`run_conv` too, and
``fibertensor decompose cp|tucker`` calls :func:`decompose_kernel_file`.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.params.conv import CPConvParams, CPDecomposeParams, TuckerConvParams, TuckerDecomposeParams
from worker.provenance import package_versions

if TYPE_CHECKING:
    from worker.io.conv_arrays import ConvInputInfo

# The engine (numba) and nibabel are imported inside the functions that use them, so that
# the job-kind registry, and with it the API, loads without them.

__all__ = ["check_conv_inputs", "run_conv", "decompose_kernel_file", "JOB_KINDS"]

#: Bytes of input plus output handled per chunk of the batch (progress and cancellation
#: are checked between chunks).
_CHUNK_BYTES = 256 * 2**20

ConvParams = CPConvParams | TuckerConvParams


def _family_rank(family: str, params: ConvParams) -> tuple[int, int] | int | None:
    if family == "cp":
        return params.rank
    # the model ensures both Tucker ranks or neither
    return None if params.rank_in is None else (params.rank_in, params.rank_out)


def check_conv_inputs(family: str, input_path: Path, params: ConvParams, factors: Path | None = None,
                      kernel: Path | None = None) -> tuple["ConvInputInfo", dict]:
    """Header-only checks of a conv job; returns the input header and the layer's shape
    (``out_channels``, ``kernel``, ``rank``, output ``out_shape``)."""
    from gpu.conv.index_tables import conv_geometry
    from worker.io.conv_arrays import check_factor_header, read_input_header, read_kernel_header

    info = read_input_header(input_path)
    if (factors is None) == (kernel is None):
        raise InputError("Factors or kernel", "give exactly one of factors (.npz) or kernel (dense .npy)")
    if factors is not None:
        layer = check_factor_header(factors, family, channels=info.shape[1])
    else:
        t, c, kh, kw = read_kernel_header(kernel)
        if c != info.shape[1]:
            raise InputError("Channel count mismatch",
                             f"the kernel expects {c} input channels but the input has {info.shape[1]}")
        rank = _family_rank(family, params)
        if rank is None:
            what = "rank" if family == "cp" else "rank_in and rank_out"
            raise InputError("Rank needed", f"a dense kernel is decomposed before the conv: give {what}")
        if family == "tucker" and (rank[0] > c or rank[1] > t):
            raise InputError("Tucker ranks", f"rank_in must be at most {c} and rank_out at most {t}, got {rank}")
        layer = {"rank": rank, "out_channels": t, "kernel": (kh, kw), "in_channels": c}
    try:
        g = conv_geometry(info.shape, layer["kernel"], params.stride, params.padding, params.dilation)
    except ValueError as exc:
        raise InputError("Convolution geometry", str(exc)) from None
    if info.is_nifti and (g.out_h, g.out_w) != info.shape[2:]:
        raise InputError(
            "Output off the input grid",
            f"a NIfTI input gets a NIfTI output on its grid, but this stride/padding/dilation gives "
            f"{g.out_h}x{g.out_w} slices instead of {info.shape[2]}x{info.shape[3]}; use stride 1 and padding 'same', "
            "or give a .npy input",
        )
    layer["out_shape"] = (g.batch, layer["out_channels"], g.out_h, g.out_w)
    return info, layer


def _factorize(family: str, kernel: np.ndarray, rank) -> tuple[object, float]:
    from gpu.conv.decompose import cp_als, tucker2_hosvd
    from gpu.conv.cp import check_cp_factors
    from gpu.conv.tucker import check_tucker_factors

    if family == "cp":
        d = cp_als(kernel, rank)
        return check_cp_factors(d.s, d.h, d.w, d.t), d.relative_error
    d = tucker2_hosvd(kernel, rank)
    return check_tucker_factors(d.u_in, d.core, d.u_out), d.relative_error


def run_conv(
    family: str,
    input_path: Path,
    out_path: Path,
    sidecar_path: Path,
    params: ConvParams,
    factors: Path | None = None,
    kernel: Path | None = None,
    progress: Callable[[float], None] | None = None,
    input_name: str | None = None,
) -> dict:
    """Check, read, (decompose,) convolve chunk by chunk, write. Returns the sidecar.

    ``progress(fraction)`` is called between chunks; an exception it raises (cancellation)
    stops the run before any output is written. ``input_name``: the input's name in the
    sidecar (as uploaded, where the service stored it inflated; default: the file's name).
    """
    from gpu.conv.cp import cp_conv2d
    from gpu.conv.tucker import tucker_conv2d
    from gpu.cuda.backend import resolve_backend
    from gpu.cuda.device import device_name
    from worker.io.conv_arrays import load_factors, load_input, load_kernel, write_output

    started = time.perf_counter()
    info, layer = check_conv_inputs(family, input_path, params, factors, kernel)
    backend = resolve_backend(params.backend)
    u = load_input(info)
    decomposition_error = None
    if factors is not None:
        f = load_factors(factors, family)
    else:
        f, decomposition_error = _factorize(family, load_kernel(kernel), layer["rank"])
    loaded = time.perf_counter()

    out = np.empty(layer["out_shape"], np.float32)
    per_image = (u[0].nbytes + out[0].nbytes) or 1
    step = max(1, _CHUNK_BYTES // per_image)
    conv = dict(stride=params.stride, padding=params.padding, dilation=params.dilation, backend=backend)
    for start in range(0, u.shape[0], step):
        chunk = slice(start, min(start + step, u.shape[0]))
        if family == "cp":
            cp_conv2d(u[chunk], f.s, f.h, f.w, f.t, f.bias, out=out[chunk], **conv)
        else:
            tucker_conv2d(u[chunk], f.u_in, f.core, f.u_out, f.bias, tiling=params.tiling, out=out[chunk], **conv)
        if progress is not None:
            progress(chunk.stop / u.shape[0])
    computed = time.perf_counter()
    write_output(out, info, out_path)
    written = time.perf_counter()

    sidecar = {
        "job": f"{family}-conv",
        "input": {"file": input_name or info.path.name, "format": "nifti" if info.is_nifti else "npy",
                  "shape_nchw": list(info.shape), "dtype": str(info.dtype)},
        "layer": {
            "source": Path(factors).name if factors is not None else Path(kernel).name,
            "decomposed_here": factors is None,
            "rank": layer["rank"],
            "in_channels": info.shape[1],
            "out_channels": layer["out_channels"],
            "kernel": list(layer["kernel"]),
            "bias": getattr(f, "bias", None) is not None,
            "decomposition_relative_error": decomposition_error,
        },
        "parameters": params.model_dump(),
        "output": {"file": Path(out_path).name, "shape_nchw": list(out.shape),
                   "non_finite": int(np.size(out) - np.count_nonzero(np.isfinite(out)))},
        "backend": backend,
        "device": device_name() if backend == "cuda" else platform.processor() or platform.machine(),
        "versions": package_versions(),
        "seconds": {"read": loaded - started, "conv": computed - loaded, "write": written - computed,
                    "total": time.perf_counter() - started},
    }
    write_json_atomic(Path(sidecar_path), sidecar)
    return sidecar


def decompose_kernel_file(kernel_path: Path, out_path: Path, params: CPDecomposeParams | TuckerDecomposeParams,
                          bias_path: Path | None = None) -> dict:
    """Factorize a dense (T, C, kh, kw) kernel ``.npy`` into a factor archive the conv jobs
    take: CP by ALS for :class:`CPDecomposeParams`, Tucker-2 by truncated HOSVD for
    :class:`TuckerDecomposeParams`; a bias ``.npy`` (T) is stored with the factors. Returns
    what was done (``family``, ``rank``, ``relative_error`` and, for CP, ``iterations`` and
    ``converged``)."""
    from gpu.conv.decompose import cp_als, tucker2_hosvd
    from worker.io.conv_arrays import load_kernel, save_factors

    kernel = load_kernel(kernel_path)
    bias = None
    if bias_path is not None:
        bias = np.load(bias_path, allow_pickle=False)
        if bias.shape != (kernel.shape[0],) or not np.all(np.isfinite(bias)):
            raise InputError("Bad bias", f"the bias must hold {kernel.shape[0]} finite values (one per output "
                             f"channel), got shape {bias.shape}")
    try:
        if isinstance(params, CPDecomposeParams):
            d = cp_als(kernel, params.rank, max_iter=params.max_iter, seed=params.seed)
            arrays = {"S": d.s, "H": d.h, "W": d.w, "T": d.t}
            report = {"family": "cp", "rank": params.rank, "iterations": d.iterations, "converged": d.converged}
        else:
            d = tucker2_hosvd(kernel, (params.rank_in, params.rank_out))
            arrays = {"U_in": d.u_in, "core": d.core, "U_out": d.u_out}
            report = {"family": "tucker", "rank": [params.rank_in, params.rank_out]}
    except ValueError as exc:
        raise InputError("Cannot decompose", str(exc)) from None
    save_factors(out_path, {**arrays, "bias": bias})
    return {**report, "relative_error": d.relative_error}


def _output_name(inputs: dict[str, Path]) -> str:
    return "output.nii.gz" if inputs["input"].name.endswith((".nii", ".nii.gz")) else "output.npy"


def _job(family: str) -> tuple[Callable, Callable]:
    def validate(inputs: dict[str, Path], params) -> None:
        check_conv_inputs(family, inputs["input"], params, inputs.get("factors"), inputs.get("kernel"))

    def run(ctx: JobContext) -> list[Path]:
        def report(fraction: float) -> None:
            ctx.check_cancelled()
            ctx.progress(fraction)

        out_path = ctx.out_dir / _output_name(ctx.inputs)
        sidecar = ctx.out_dir / "conv.json"
        uploaded = ctx.uploaded.get("input")
        run_conv(family, ctx.inputs["input"], out_path, sidecar, ctx.params, factors=ctx.inputs.get("factors"),
                 kernel=ctx.inputs.get("kernel"), progress=report, input_name=uploaded.name if uploaded else None)
        return [out_path, sidecar]

    return validate, run


def _slots(family: str) -> tuple[InputSlot, ...]:
    layout = ("S (C×R), H (kh×R), W (kw×R), T (T×R), optional bias (T)" if family == "cp"
              else "U_in (C×D1), core (D2×D1×kh×kw), U_out (T×D2), optional bias (T)")
    return (
        InputSlot("input", True, (".npy", ".nii", ".nii.gz"),
                  "(N, C, H, W) float32 .npy, or a 3D/4D NIfTI convolved slice by slice (4th axis = channels)"),
        InputSlot("factors", False, (".npz",), f"{family.upper() if family == 'cp' else 'Tucker'} factors: {layout}"),
        InputSlot("kernel", False, (".npy",), "dense (T, C, kh, kw) kernel to decompose instead of factors"),
    )


_cp_validate, _cp_run = _job("cp")
_tucker_validate, _tucker_run = _job("tucker")

JOB_KINDS = [
    JobKind(
        name="cp-conv",
        summary="2D convolution with a CP-decomposed kernel (fused kernel after Reustle, Rabbani & Huang)",
        params_model=CPConvParams,
        inputs=_slots("cp"),
        validate=_cp_validate,
        run=_cp_run,
        result_names=("output.npy", "output.nii.gz", "conv.json"),
    ),
    JobKind(
        name="tucker-conv",
        summary="2D convolution with a Tucker-2 kernel: 1x1, core conv (TDC kernel), 1x1",
        params_model=TuckerConvParams,
        inputs=_slots("tucker"),
        validate=_tucker_validate,
        run=_tucker_run,
        result_names=("output.npy", "output.nii.gz", "conv.json"),
    ),
]
