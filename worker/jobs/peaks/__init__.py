"""The fiber-peaks job: an SH FOD image in, peaks in MRtrix3 ``sh2peaks`` layout and fODF
metrics out.

Outputs, on the input's grid (same affine and spatial header), named ``{stem}{name}{suffix}``
(:class:`PeaksOutputs`), declared in :mod:`worker.jobs.peaks.outputs`:

* ``peaks`` — float32 4D with 3·K volumes; triplet k is amplitude_k × unit direction_k, NaN
  where a voxel has fewer than K peaks, is masked out, or had non-finite coefficients
  (as ``sh2peaks`` writes them);
* ``amplitudes`` — float32 4D, K volumes, the FOD value at each peak, descending;
* ``count`` — uint8 3D, the number of peaks per voxel (NuFO);
* the fODF metrics chosen by ``metrics`` (:mod:`gpu.peaks.fodf_metrics`): ``afd_max``,
  ``afd_total``, ``afd_sum`` (float32 3D), ``peak_fraction`` (float32, K volumes), ``rgb``
  (uint8, 3 volumes);
* ``qc.png`` — the quality-control picture (:mod:`worker.qc_picture`), unless ``qc`` is off;
* on request (``format``) an MRtrix3 fixel directory ``fixels`` (MRtrix images) and a DIPY
  ``peaks.pam5``;
* a JSON sidecar (:mod:`worker.jobs.peaks.sidecar`) — input checksums, parameters, SH basis,
  lmax, backend, device, versions, timings, counts, ``warnings`` (voxels whose coefficients
  are NaN or infinite), and ``generated_by`` as a BIDS ``GeneratedBy`` entry.

The images are NIfTI (``.nii.gz``) or MRtrix (``.mif``, or ``.mif.gz`` from a compressed
input), as the input is, unless ``format`` names image formats. A volume with no voxel to
compute (every selected voxel non-finite, or an empty mask) fails before computing.

The steps, one module each, as :func:`run_peaks` takes them: :mod:`.plan` (the headers,
checked, parsed once), :mod:`.read`, :mod:`.compute` (the engine), :mod:`.write` (the
outputs, then :mod:`.sidecar`); :mod:`.memory` estimates the job's memory from the headers.
The engine (numba) and nibabel are imported inside the functions that use them, so that
the job-kind registry, and with it the API, loads without them.
"""

from worker.jobs.peaks.compute import compute_peaks, engine_options, prepare_engine
from worker.jobs.peaks.job import JOB_KINDS, run_peaks, run_peaks_of_sh
from worker.jobs.peaks.names import PeaksOutputs, image_suffixes
from worker.jobs.peaks.outputs import IMAGE_OUTPUTS, warm_up_pam5_writer, warm_up_writers
from worker.jobs.peaks.plan import PeaksPlan, plan_peaks
from worker.jobs.peaks.read import PeaksInputs, peaks_inputs_of_sh, read_peaks_inputs
from worker.jobs.peaks.write import write_peaks_outputs
from worker.params.peaks import PeaksParams

__all__ = ["PeaksOutputs", "PeaksPlan", "PeaksInputs", "IMAGE_OUTPUTS", "engine_options", "image_suffixes",
           "plan_peaks", "read_peaks_inputs", "peaks_inputs_of_sh", "prepare_engine", "compute_peaks",
           "write_peaks_outputs", "run_peaks", "run_peaks_of_sh", "warm_up_writers", "warm_up_pam5_writer",
           "PeaksParams", "JOB_KINDS"]
