"""The ``compress`` and ``decompress`` job kinds: error-bounded Tucker compression of NIfTI volumes.

``compress`` reads a 3D–5D NIfTI volume and codes it to one error target
(:func:`gpu.compress.error_bounded.encode_tensor`: ST-HOSVD with its core by the FP16 TTMc,
quantised and entropy-coded, and the residual coded in the SZ style), then writes the ``.npz``
container of :mod:`worker.io.tucker_npz` and a JSON sidecar (ratio, relative, max and PSNR
errors measured on the result, the TTMc bound, phase times; with ``report_dwi``, the
differences of DTI and CSD-peak measures, :mod:`worker.jobs.compress_dwi_report`).
``decompress`` turns a container (version 1, 2 or 3) back into a NIfTI volume with the
original header and affine. The CLI (``fibertensor compress|decompress``) calls
:func:`compress_file` and :func:`decompress_file`, as the jobs do.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from worker.errors import InputError, JobCancelled
from worker.io.atomic import atomic_path, write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.params.compress import CompressParams, DecompressParams

# The engine (numba, scipy) and nibabel are imported inside the functions that use them, so
# that the job-kind registry, and with it the API, loads without them.

__all__ = ["compress_file", "decompress_file", "JOB_KINDS"]


def _load_header(path: Path):
    import nibabel as nib

    try:
        return nib.load(path)
    except Exception as exc:  # nibabel raises several types for unreadable files
        raise InputError("Unreadable volume", f"volume: {path.name} is not a readable NIfTI file ({exc})") from None


def _validate_compress(inputs: dict[str, Path], params: CompressParams) -> None:
    image = _load_header(inputs["volume"])
    if params.report_dwi:
        if inputs.get("bval") is None or inputs.get("bvec") is None:
            raise InputError("Gradients missing", "report_dwi: needs the DWI's gradients; give bval and bvec "
                             "(FSL text files)")
        if len(image.shape) != 4:
            raise InputError("Not a DWI", f"report_dwi: needs a 4D DWI series, got shape {image.shape}")
    shape = image.shape
    if not 3 <= len(shape) <= 5:
        raise InputError(
            "Wrong dimensions", f"volume: must be 3D, 4D or 5D (a tensor of order 3–5), got shape {shape}"
        )
    dtype = np.dtype(image.get_data_dtype())
    if dtype.fields is not None or not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
        raise InputError("Unsupported data type", f"volume: data type {dtype} is not a real scalar type")
    if params.ranks is not None:
        if len(params.ranks) != len(shape) or any(not 1 <= r <= s for r, s in zip(params.ranks, shape)):
            raise InputError(
                "Bad ranks", f"ranks: need {len(shape)} ranks, each between 1 and its axis length {shape}; got {params.ranks}"
            )


def _validate_decompress(inputs: dict[str, Path], params: DecompressParams) -> None:
    from worker.io.tucker_npz import FORMAT

    path = inputs["archive"]
    try:
        with np.load(path, allow_pickle=False) as data:
            if "format" not in data.files or str(data["format"]) != FORMAT:
                raise InputError("Not a compressed volume", f"archive: {path.name} was not written by 'fibertensor compress'")
    except InputError:
        raise
    except Exception as exc:  # zipfile/OSError/ValueError: not an npz at all
        raise InputError("Unreadable archive", f"archive: {path.name} is not a readable .npz file ({exc})") from None


def compress_file(in_path: Path, out_path: Path, params: CompressParams, progress=lambda f: None,
                  check_cancelled=lambda: None, input_name: str | None = None, bval: Path | None = None,
                  bvec: Path | None = None) -> dict:
    """Compress a NIfTI volume into the ``.npz`` container; returns the report (also saved),
    which names the input ``input_name`` (as uploaded, where the service stored it inflated;
    default: the file's name). ``bval``/``bvec``: the DWI's gradients, for ``report_dwi``."""
    from gpu.compress.error_bounded import ErrorTarget, encode_tensor
    from gpu.compress.ttmc import TTMcOverflowError
    from worker.io.tucker_npz import output_dtype, save_archive

    from worker.io.nifti import load_nifti_data, read_nifti_header

    in_path, out_path = Path(in_path), Path(out_path)
    _validate_compress({"volume": in_path, "bval": bval, "bvec": bvec}, params)
    image = _load_header(in_path)
    # the checked reader: one inflate, and damaged data refused as the upload checks refuse it
    data = load_nifti_data(read_nifti_header(in_path, "volume"))
    if not np.all(np.isfinite(data)):
        raise InputError("Non-finite values", "volume: contains NaN or infinite values; replace them (e.g. by 0) first")

    def step(fraction: float) -> None:
        check_cancelled()
        progress(0.9 * fraction)

    mode, value = params.target
    try:
        encoded = encode_tensor(
            data, ErrorTarget(mode, value), output_dtype=output_dtype(image.header),
            ranks=tuple(params.ranks) if params.ranks is not None else None, precision=params.precision,
            scaling=params.scaling, order=params.order, hooi_sweeps=params.hooi_sweeps, backend=params.backend,
            on_overflow="raise" if params.on_overflow == "fail" else "fallback", progress=step)
    except TTMcOverflowError as exc:
        raise InputError("Overflow", f"volume: {exc}") from None
    except ValueError as exc:
        raise InputError("Unreachable target", f"{mode}: {exc}") from None
    report = {"input": input_name or in_path.name, "shape": list(image.shape), **encoded.report,
              "scaling": params.scaling}
    check_cancelled()
    save_archive(out_path, encoded, image, report)
    original_bytes = math.prod(image.shape) * np.dtype(image.get_data_dtype()).itemsize
    report["archive_bytes"] = out_path.stat().st_size
    report["compression_ratio"] = original_bytes / report["archive_bytes"]
    if params.report_dwi:
        from worker.io.tucker_npz import load_archive

        report["dwi"] = _dwi_report(data, load_archive(out_path).reconstruct(), bval, bvec)
    progress(1.0)
    return report


def _dwi_report(data: np.ndarray, decoded: np.ndarray, bval: Path, bvec: Path) -> dict:
    from dipy.io.gradients import read_bvals_bvecs

    from worker.jobs.compress_dwi_report import dwi_differences

    try:
        bvals, bvecs = read_bvals_bvecs(str(bval), str(bvec))
        return dwi_differences(data, decoded, bvals, bvecs)
    except (OSError, ValueError) as exc:
        raise InputError("Unusable gradients", f"bval/bvec: {exc}") from None


def decompress_file(in_path: Path, out_path: Path) -> dict:
    """Restore the NIfTI volume from an archive, with its header and affine."""
    import nibabel as nib

    from worker.io.tucker_npz import archive_volume, load_archive

    in_path, out_path = Path(in_path), Path(out_path)
    _validate_decompress({"archive": in_path}, DecompressParams())
    try:
        archive = load_archive(in_path)
    except ValueError as exc:
        raise InputError("Unusable archive", f"archive: {exc}") from None
    try:
        image = archive_volume(archive)
    except ValueError as exc:  # a stream's checks: lengths, tables, chunks that do not decode
        raise InputError("Damaged archive", f"archive: {in_path.name} does not decode ({exc}); copy it again "
                         "from where it was written, or compress the volume again") from None
    with atomic_path(out_path) as temporary:
        nib.save(image, str(temporary))
    return {"output": out_path.name, "shape": list(archive.shape), "dtype": archive.dtype.name,
            "version": archive.version,
            **{key: archive.report.get(key) for key in ("relative_error", "max_error", "psnr")}}


def _run_compress(ctx: JobContext) -> list[Path]:
    archive = ctx.out_dir / "compressed.npz"
    try:
        uploaded = ctx.uploaded.get("volume")
        report = compress_file(ctx.inputs["volume"], archive, ctx.params, ctx.progress, ctx.check_cancelled,
                               input_name=uploaded.name if uploaded else None, bval=ctx.inputs.get("bval"),
                               bvec=ctx.inputs.get("bvec"))
    except JobCancelled:
        archive.unlink(missing_ok=True)
        raise
    ctx.log(
        f"ranks {report['ranks']}, ratio {report['compression_ratio']:.1f}, relative error "
        f"{report['relative_error']:.3g}, max error {report['max_error']:.3g}, PSNR {report['psnr']:.1f} dB "
        f"(TTMc bound {report['bound']:.3g})"
    )
    return [archive, write_json_atomic(ctx.out_dir / "compressed.json", report)]


def _run_decompress(ctx: JobContext) -> list[Path]:
    ctx.check_cancelled()
    out = ctx.out_dir / "decompressed.nii.gz"
    report = decompress_file(ctx.inputs["archive"], out)
    ctx.progress(1.0)
    return [out, write_json_atomic(ctx.out_dir / "decompressed.json", report)]


JOB_KINDS = [
    JobKind(
        name="compress",
        summary="Compress a volume to an error target (tol, abs or PSNR): Tucker (FP16 TTMc) with a coded "
        "core and residual, into an .npz archive",
        params_model=CompressParams,
        inputs=(InputSlot("volume", True, (".nii", ".nii.gz"), "3D–5D NIfTI volume to compress"),
                InputSlot("bval", False, ("bval", "bvals", ".txt"), "FSL b-values, for report_dwi"),
                InputSlot("bvec", False, ("bvec", "bvecs", ".txt"), "FSL b-vectors, for report_dwi")),
        validate=_validate_compress,
        run=_run_compress,
        result_names=("compressed.npz", "compressed.json"),
    ),
    JobKind(
        name="decompress",
        summary="Restore a NIfTI volume from a compress archive",
        params_model=DecompressParams,
        inputs=(InputSlot("archive", True, (".npz",), "archive written by the compress job"),),
        validate=_validate_decompress,
        run=_run_decompress,
        result_names=("decompressed.nii.gz", "decompressed.json"),
    ),
]
