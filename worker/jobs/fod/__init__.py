"""The DWI → FOD jobs: ``fod``, a DWI → fibre orientation distributions by constrained
spherical deconvolution, as MRtrix3's ``dwi2fod`` (:func:`gpu.fod.msmt_csd`,
:func:`gpu.fod.csd`), ``response``, a DWI → response functions, as ``dwi2response``, and
``mask``, a DWI → brain mask, as ``dwi2mask``.

``msmt_csd`` writes ``wmfod``, ``gm`` and ``csf`` (with WM, GM and CSF responses; ``wmfod``
alone with a WM response alone), ``csd`` writes ``wmfod``, in the DWI's image format, with a
JSON sidecar. Without response files they are estimated first (:mod:`.response`) and
written too: for ``msmt_csd`` as ``dwi2response dhollander`` does, for ``csd`` as
``dwi2response tournier``. With ``peaks``, the WM FOD's peaks follow, from the FOD in
memory: the outputs ``fibertensor peaks`` writes of the written FOD
(:func:`worker.jobs.peaks.run_peaks_of_sh`), named ``peaks``, ``amplitudes``, …,
``peaks.json`` after the same prefix. A failure leaves none of a job's files behind.

The steps, one module each: :mod:`.inputs` (what the jobs share: the DWI, its gradients
and mask checked from headers, the read, the output names), :mod:`.plan` (a fod job's
checks, lmax per tissue, slabs, memory), :mod:`.response` (the ``response`` job and the
estimation a fod job starts with), :mod:`.mask` (the ``mask`` job), :mod:`.stages` (read,
fit, write: what the batch pipeline overlaps across inputs) and :mod:`.job` (:func:`run_fod`,
the stages in a row, and the job kinds' registry entries).
"""

from worker.jobs.fod.job import JOB_KINDS, run_fod
from worker.jobs.fod.mask import run_mask
from worker.jobs.fod.plan import FodPlan, fod_memory_bytes, plan_fod
from worker.jobs.fod.response import run_response

__all__ = ["FodPlan", "plan_fod", "run_fod", "run_response", "run_mask", "fod_memory_bytes", "JOB_KINDS"]
