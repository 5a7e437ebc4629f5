"""fibertensor runs without scipy (docs/decisions/no-scipy.md): no module imports it but the
``.pam5`` writer (the optional DIPY extra), and the FOD and fixels families (their modules,
jobs and commands, the response fit) run in a process where importing scipy fails, as on an
install without it; there a peaks job asked for ``.pam5`` is refused with how to install DIPY,
and the warm-up leaves the ``.pam5`` writer out."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np

from gpu.fixels.segment import segment_fods
from tests.worker.jobs.fod_phantom import write_phantom

ROOT = Path(__file__).resolve().parents[1]
# may import scipy: the .pam5 writer (the DIPY extra brings scipy)
ALLOWED = {"worker/io/pam5.py"}

# an import hook that fails every scipy import, as when scipy is not installed; then the FOD
# family's modules and jobs, the fod command, and the response fit's numerics
_WITHOUT_SCIPY = """
import importlib, json, pkgutil, sys

class NoScipy:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "scipy":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoScipy())
import gpu.fixels, gpu.fod
for package in (gpu.fod, gpu.fixels):
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
import worker.jobs.fod
for module in pkgutil.iter_modules(worker.jobs.fod.__path__):
    importlib.import_module(f"worker.jobs.fod.{module.name}")
importlib.import_module("worker.jobs.fixels")
from service.cli import main
from tests.test_no_scipy import response_numerics
from worker.jobs.peaks.outputs import warm_up_pam5_writer
codes = [main(command) for command in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "numerics": response_numerics(), "pam5 warm-up": warm_up_pam5_writer(),
                  "scipy": sorted(m for m in sys.modules if m.partition(".")[0] == "scipy")}))
"""


def response_numerics() -> dict:
    """The response fit's pieces that scipy once did (Legendre functions, triangular, Cholesky and
    NNLS solves, 6-connected morphology) on the phantom's single-fibre signal, as lists."""
    import numpy as np

    from gpu.fod.amp2response import amp2response
    from gpu.fod.masks import dilate_6_connected, erode_6_connected

    rng = np.random.default_rng(1)
    directions = rng.standard_normal((30, 3))
    scheme = np.vstack([np.zeros((2, 4))] + [np.hstack([directions / np.linalg.norm(directions, axis=1)[:, None],
                                                         np.full((30, 1), b)]) for b in (1000.0, 3000.0)])
    fibres = rng.standard_normal((20, 3))
    fibres /= np.linalg.norm(fibres, axis=1)[:, None]
    # one prolate tensor a voxel, noisy enough that the constraints bind on the outer shell
    signal = 1000 * np.exp(-scheme[:, 3] * (0.3e-3 + 1.4e-3 * (fibres @ scheme[:, :3].T) ** 2))
    signal += rng.normal(scale=100.0, size=signal.shape)
    mask = np.random.default_rng(2).random((6, 5, 4)) < 0.6
    return {"constrained": amp2response(signal, fibres, scheme)[0].tolist(),
            "ols": amp2response(signal, fibres, scheme, constrained=False)[0].tolist(),
            "eroded": erode_6_connected(mask).tolist(), "dilated": dilate_6_connected(mask, 2).tolist()}


def _imports_scipy(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(name.partition(".")[0] == "scipy" for name in names):
            return True
    return False


def test_no_module_imports_scipy_but_the_optional_ones():
    importing = {str(p.relative_to(ROOT)) for layer in ("gpu", "worker", "service")
                 for p in (ROOT / layer).rglob("*.py") if _imports_scipy(p)}
    assert "worker/io/pam5.py" in importing  # the scan finds imports
    assert importing <= ALLOWED


def test_fod_and_fixels_families_run_without_scipy(tmp_path):
    p = write_phantom(tmp_path)["paths"]
    gradients = ["--bval", str(p["bval"]), "--bvec", str(p["bvec"]), "--mask", str(p["mask"])]
    commands = [["fod", str(p["dwi"]), str(tmp_path / "fod"), *gradients, "--response", str(p["wm"]), str(p["gm"]),
                 str(p["csf"]), "--backend", "cpu", "--quiet"],
                # dhollander's percentages are of a whole brain's voxels; the phantom has a few hundred
                ["response", str(p["dwi"]), str(tmp_path / "dhollander"), *gradients, "--erode", "0", "--sfwm", "20",
                 "--gm", "20", "--csf", "20", "--quiet"],
                ["response", str(p["dwi"]), str(tmp_path / "tournier"), *gradients, "--algorithm", "tournier",
                 "--quiet"],
                ["fixels", str(tmp_path / "fod_wmfod.nii"), str(tmp_path / "fixels"), "--backend", "cpu", "--quiet"],
                # .pam5 needs DIPY, which brings scipy: without them, refused at the door (exit 2)
                ["peaks", str(tmp_path / "fod_wmfod.nii"), str(tmp_path / "pam"), "--format", "pam5",
                 "--backend", "cpu", "--quiet"]]
    done = subprocess.run([sys.executable, "-c", _WITHOUT_SCIPY, json.dumps(commands)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["codes"], result["scipy"]) == ([0, 0, 0, 0, 2], [])
    assert "pip install 'fibertensor[dipy]'" in done.stderr
    assert result["pam5 warm-up"] is None and not list(tmp_path.glob("pam*"))
    # the same numbers as in this process, where scipy is installed, and the fit is a response
    expected = response_numerics()
    assert result["numerics"] == expected
    constrained = np.array(expected["constrained"])
    assert constrained.shape == (3, 6) and np.all(constrained[:, 0] > 0) and constrained[1, 1] < 0
    assert np.abs(constrained - expected["ols"]).max() > 1.0
    assert (tmp_path / "fod_wmfod.nii").stat().st_size > 0
    for prefix, tissues in (("dhollander", ("wm", "gm", "csf")), ("tournier", ("wm",))):
        for tissue in tissues:
            assert np.loadtxt(tmp_path / f"{prefix}_{tissue}.txt", ndmin=2)[0, 0] > 0
    # the fixels of the FOD written there, as this process segments them
    fod = nib.load(tmp_path / "fod_wmfod.nii").get_fdata(dtype=np.float32)
    expected_index = segment_fods(fod, backend="cpu").index
    np.testing.assert_array_equal(nib.load(tmp_path / "fixels" / "index.nii").get_fdata(), expected_index)
    assert expected_index[..., 0].sum() > 0
