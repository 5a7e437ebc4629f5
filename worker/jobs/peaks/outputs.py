"""The outputs a peaks job can write, declared as a list: each one's name (its key in the
sidecar's ``outputs``), when it is wanted, its files, the arrays it is made from, and its
writer. :mod:`worker.jobs.peaks.write` turns the wanted ones into tasks."""

from __future__ import annotations

import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from worker.io.atomic import atomic_path
from worker.jobs.peaks.names import PeaksOutputs
from worker.params.peaks import METRICS, PeaksParams

if TYPE_CHECKING:
    from gpu.fixels.segment import FixelSet
    from gpu.peaks.fodf_metrics import FodfMetrics
    from gpu.peaks.search import PeaksResult
    from worker.jobs.peaks.plan import PeaksPlan

__all__ = ["IMAGE_OUTPUTS", "OutputSource", "Array", "Output", "ARRAYS", "OUTPUTS", "wanted_outputs",
           "wanted_arrays", "output_files", "import_writer_modules", "warm_up_writers",
           "warm_up_pam5_writer"]


@dataclass(frozen=True)
class OutputSource:
    """What the outputs are made from and where they go: the plan, the SH volume, the
    engine's result, the file names, whether the fixel directory goes into one ``.tar``
    (a service's results are files), the gzip threads per image, and the mask (voxels
    segmented into fixels; None: all)."""

    plan: "PeaksPlan"
    sh: np.ndarray
    result: "PeaksResult"
    destination: PeaksOutputs
    fixel_archive: bool = False
    compress_threads: int | None = None
    mask: np.ndarray | None = None


@dataclass(frozen=True)
class Array:
    """An array that outputs share, made once by ``make(source)``. ``modules``: those its
    making imports that load numba; ``long``: see :class:`Output`."""

    name: str
    make: Callable[[OutputSource], object]
    modules: tuple[str, ...] = ()
    long: bool = False


@dataclass(frozen=True)
class Output:
    """One output: wanted where ``wanted(params)``, written to each of ``files(source)`` by
    ``write(source, path, *arrays)``, given the :data:`ARRAYS` named in ``needs``.
    ``modules``: those its writer imports that load numba, imported before the writers'
    threads start; ``long``: started before the short tasks, so that on few cores these
    fill in around it."""

    name: str
    wanted: Callable[[PeaksParams], bool]
    files: Callable[[OutputSource], list[Path]]
    write: Callable[..., object]
    needs: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    long: bool = False


def _image_files(name: str) -> Callable[[OutputSource], list[Path]]:
    return lambda source: [source.destination.path(name, suffix) for suffix in source.plan.suffixes]


def _image(data: Callable[..., np.ndarray]) -> Callable[..., Path]:
    """A writer of the image ``data(source, *arrays)`` on the FOD's grid."""

    def write(source: OutputSource, path: Path, *arrays) -> Path:
        from worker.io.images import save_image

        return save_image(source.plan.fod, data(source, *arrays), path, source.compress_threads)

    return write


def _write_qc(source: OutputSource, path: Path) -> Path:
    from worker.qc_picture import write_peaks_qc_png

    plan, result = source.plan, source.result
    basis, k = plan.params.basis, plan.params.npeaks
    frame = "world" if basis == "mrtrix" else "voxel"  # MRtrix3 SH live in scanner space
    title = f"{plan.name('fod')}: lmax {result.stats['lmax']}, K = {k} peaks, {basis} basis"
    return write_peaks_qc_png(path, result.directions, result.amplitudes, result.count, plan.fod.zooms[:3], title,
                              affine=plan.fod.affine, directions_frame=frame, npeaks=k)


def _fmls_fixels(source: OutputSource) -> "FixelSet":
    """The FOD's fixels as ``fod2fixel`` makes them with its default options (FMLS lobes with
    their afd, peak_amp and disp), from the SH volume in memory, directions in scanner space
    as a fixel directory holds them. A DIPY-basis FOD is re-expressed in MRtrix3's basis
    first, and its fixels' directions, along the image axes, are rotated into scanner space."""
    from dataclasses import replace

    from gpu.fixels.segment import segment_fods
    from gpu.sh_basis import convert_sh_basis
    from worker.jobs.peaks.arrays import peaks_frame_rotation

    params = source.plan.params
    sh = convert_sh_basis(source.sh, params.basis, "mrtrix")
    fixels = segment_fods(sh, source.mask, backend=params.backend)
    rotation = peaks_frame_rotation(params.basis, "scanner", source.plan.fod.affine)
    if rotation is None:
        return fixels
    return replace(fixels, directions=(fixels.directions.astype(np.float64) @ rotation.T).astype(np.float32))


def _write_fixels(source: OutputSource, path: Path, fixels: "FixelSet") -> Path:
    """The fixel directory at ``path``, or in the ``.tar`` at ``path`` (``fixel_archive``)."""
    from worker.io.fixels import FMLS_QUANTITIES, write_fixel_images

    # MRtrix format whatever the images' (as fod2fixel writes it): NIfTI-1 cannot hold the
    # N × 3 × 1 fixel images of more than 32767 fixels. A tar's images are compressed
    # already where the input was.
    plan = source.plan
    fmt = "mif.gz" if plan.name("fod").endswith(".gz") else "mif"
    folder = source.destination.path("fixels")
    staging = folder.with_name(f".{folder.name}.staging")
    target = staging / folder.name if source.fixel_archive else folder
    quantities = {name: getattr(fixels, name) for name in FMLS_QUANTITIES}
    write_fixel_images(target, fixels.index, fixels.directions, quantities, plan.fod.affine, fmt=fmt)
    if source.fixel_archive:
        with atomic_path(path) as temporary, tarfile.open(temporary, "w") as archive:
            archive.add(target, arcname=folder.name)
        shutil.rmtree(staging)
    return path


def _fixel_files(source: OutputSource) -> list[Path]:
    folder = source.destination.path("fixels")
    return [folder.with_name(folder.name + ".tar") if source.fixel_archive else folder]


def _write_pam5(source: OutputSource, path: Path) -> Path:
    from worker.io.pam5 import write_pam5
    from worker.jobs.peaks.arrays import scanner_to_image_axes

    # DIPY keeps directions in the frame of its gradient table, the image axes; its
    # shm_coeff is in its own basis and frame: only a DIPY-basis input is that.
    plan, result = source.plan, source.result
    rotation = scanner_to_image_axes(plan.fod.affine) if plan.params.basis == "mrtrix" else None
    shm = source.sh if plan.params.basis == "dipy" else None
    write_pam5(path, result.directions, result.amplitudes, plan.fod.affine, rotation=rotation, shm_coeff=shm)
    return path


def _metrics(source: OutputSource) -> "FodfMetrics":
    from worker.jobs.peaks.arrays import fodf_metrics_of

    return fodf_metrics_of(source.sh, source.result)


def _peaks_image(source: OutputSource) -> np.ndarray:
    from worker.jobs.peaks.arrays import peaks_frame_rotation, peaks_image

    params = source.plan.params
    rotation = peaks_frame_rotation(params.basis, params.peaks_frame, source.plan.fod.affine)
    return peaks_image(source.result.directions, source.result.amplitudes, rotation)


#: The arrays outputs share. Nothing waits for the fODF metrics but their maps: the QC
#: picture colours its three slices itself.
ARRAYS = (
    Array("metrics", _metrics, long=True),
    Array("peaks_image", _peaks_image, long=True),
    Array("fmls_fixels", _fmls_fixels, long=True),
)

#: Every output, in the sidecar's order.
OUTPUTS = (
    Output("peaks", lambda params: True, _image_files("peaks"), _image(lambda source, image: image),
           needs=("peaks_image",)),
    Output("amplitudes", lambda params: True, _image_files("amplitudes"),
           _image(lambda source: source.result.amplitudes.astype(np.float32, copy=False))),
    Output("count", lambda params: True, _image_files("count"),
           _image(lambda source: source.result.count.astype(np.uint8, copy=False))),
    *(Output(name, lambda params, name=name: name in params.metrics, _image_files(name),
             _image(lambda source, metrics, name=name: getattr(metrics, name)), needs=("metrics",))
      for name in METRICS),
    Output("qc", lambda params: params.qc, lambda source: [source.destination.path("qc", ".png")], _write_qc, long=True),
    Output("fixel", lambda params: "fixel" in params.format, _fixel_files, _write_fixels, needs=("fmls_fixels",),
           modules=("worker.io.fixels",), long=True),
    Output("pam5", lambda params: "pam5" in params.format, lambda source: [source.destination.path("peaks", ".pam5")],
           _write_pam5, modules=("worker.io.pam5",), long=True),
)

#: The image outputs a peaks job can write, by name.
IMAGE_OUTPUTS = ("peaks", "amplitudes", "count") + METRICS


def wanted_outputs(params: PeaksParams) -> tuple[Output, ...]:
    """The outputs a job with ``params`` writes, in the sidecar's order."""
    return tuple(output for output in OUTPUTS if output.wanted(params))


def wanted_arrays(outputs: tuple[Output, ...]) -> tuple[Array, ...]:
    """The arrays ``outputs`` are made from."""
    return tuple(array for array in ARRAYS if any(array.name in output.needs for output in outputs))


def output_files(source: OutputSource) -> dict[str, list[Path]]:
    """The files of each of the plan's outputs, by name, in the sidecar's order."""
    return {output.name: output.files(source) for output in source.plan.outputs}


def import_writer_modules(outputs: tuple[Output, ...]) -> None:
    """Import every module that ``outputs`` need and that loads numba, in the calling
    thread, before the writers' threads start (:func:`gpu.ahead_of_time.import_numba_module`).
    The compiled passes that may have an ahead-of-time build (the fODF metrics, the QC
    picture, FMLS segmentation's loop) are not among them: they are looked up when called,
    and imported then if not built."""
    from gpu.ahead_of_time import import_numba_module

    for module in (*(m for array in wanted_arrays(outputs) for m in array.modules),
                   *(m for output in outputs for m in output.modules)):
        import_numba_module(module)


def warm_up_writers() -> float:
    """Load the writers' compiled passes (the QC picture's rasterizer, the fODF metrics) from
    numba's cache, or compile them (numba's code, whatever ahead-of-time build exists), so that
    a worker's first job waits for neither; returns the seconds taken."""
    import time

    from gpu.ahead_of_time import numba_only
    from gpu.peaks.search import PeaksResult
    from worker.jobs.peaks.arrays import fodf_metrics_of
    from worker.qc_picture import warm_up_qc_picture

    started = time.perf_counter()
    shape = (2, 2, 2)
    result = PeaksResult(np.zeros((*shape, 1, 3), np.float32), np.ones((*shape, 1), np.float32),
                         np.ones(shape, np.uint8), {})
    with numba_only():
        warm_up_qc_picture()
        fodf_metrics_of(np.ones((*shape, 15), np.float32), result)
    return time.perf_counter() - started


def warm_up_pam5_writer() -> float | None:
    """Compile the ``.pam5`` writer's passes into numba's cache (or load them); returns the
    seconds taken, or None where DIPY, which the format needs, is not installed. Apart from
    :func:`warm_up_writers`: a pool process that loads DIPY as it starts, for a format few
    jobs ask for, would start a second later."""
    import tempfile
    import time

    from worker.errors import InputError
    from worker.io.pam5 import require_dipy, write_pam5

    try:
        require_dipy()
    except InputError:
        return None
    started = time.perf_counter()
    shape = (2, 2, 2, 1)
    with tempfile.TemporaryDirectory() as folder:
        write_pam5(Path(folder) / "warm-up.pam5", np.zeros((*shape, 3), np.float32), np.ones(shape, np.float32),
                   np.eye(4), rotation=np.eye(3))
    return time.perf_counter() - started
