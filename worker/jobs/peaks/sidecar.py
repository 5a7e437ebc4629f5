"""The peaks job's JSON sidecar: inputs and their checksums, parameters, the engine's
figures, the files written, warnings and provenance."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from worker.io.atomic import write_json_atomic
from worker.jobs.peaks.names import PeaksOutputs
from worker.provenance import generated_by, package_versions

if TYPE_CHECKING:
    from gpu.peaks.search import PeaksResult
    from worker.jobs.peaks.plan import PeaksPlan
    from worker.jobs.peaks.read import PeaksInputs

__all__ = ["write_peaks_sidecar"]


def write_peaks_sidecar(plan: "PeaksPlan", inputs: "PeaksInputs", result: "PeaksResult", destination: PeaksOutputs,
                        files: dict[str, list[Path]], write_seconds: float) -> dict:
    """Write the sidecar of a run whose outputs are written, ``files`` by output, and
    return its content: its ``outputs`` names the files relative to the output folder, and
    ``generated_by`` is a BIDS ``GeneratedBy`` entry."""
    stats = dict(result.stats)
    seconds = stats.pop("seconds")
    sidecar = {
        "job": "peaks",
        "generated_by": generated_by(),
        "input": {"fod": plan.name("fod"), "mask": plan.name("mask"),
                  "shape": list(plan.fod.shape), "dtype": str(plan.fod.dtype), "sha256": inputs.sha256},
        "parameters": plan.params.model_dump(),
        "sh_basis": plan.params.basis,
        "outputs": {name: [str(path.relative_to(destination.folder)) for path in paths] for name, paths in files.items()},
        "peaks_frame": plan.params.peaks_frame,
        "layout": "MRtrix3 sh2peaks: volumes 3k..3k+2 = amplitude_k * unit direction_k, in the peaks_frame "
                  "(scanner: scanner-space axes, as sh2peaks; voxel: along the image axes); NaN where absent",
        **stats,
        "warnings": inputs.warnings,
        "voxels_with_peaks": int((result.count > 0).sum()),
        "versions": package_versions("nibabel", "isal", "pillow"),
        "seconds": {"read": inputs.seconds, **{f"peaks_{name}": value for name, value in seconds.items()},
                    "write": write_seconds, "total": inputs.seconds + seconds["total"] + write_seconds},
    }
    write_json_atomic(destination.sidecar, sidecar)
    return sidecar
