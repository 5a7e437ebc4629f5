"""Fast start: what a fresh process imports, and numba's kernel cache (warm-up, compile notice).

Each check runs a fresh Python process, since what matters is what a new process loads.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from service.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
# numba, and what a job family brings with it; nibabel's own ``import scipy`` (the bare
# package, to test for it) is not among them.
HEAVY = ("numba", "llvmlite", "scipy.special", "scipy.linalg", "torch", "tensorly", "dipy")
NOTICE = "into numba's cache (first use"


def python(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, check=True, timeout=600)


def loaded_modules(code: str) -> tuple[set[str], str]:
    """Modules in ``sys.modules`` after ``code`` runs in a fresh process (SystemExit ignored),
    and what ``code`` printed."""
    probe = f"import json, sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))"
    printed, _, modules = python(probe).stdout.strip().rpartition("\n")
    return set(json.loads(modules)), printed


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_help_lists_every_command_without_importing_any():
    modules, printed = loaded_modules("from service.cli import main; main(['--help'])")
    assert sorted(m for m in modules if m.startswith(("service.cli.", "worker", "gpu"))) == []
    assert heavy(modules) == []
    assert "numpy" not in modules and "pydantic" not in modules
    listing = " ".join(printed.split())
    for name, (_, text) in COMMANDS.items():
        assert f" {name} {text}" in listing


def test_a_command_imports_its_own_module_only():
    modules, _ = loaded_modules("from service.cli import main; main(['sample', '--help'])")
    assert "service.cli.sample" in modules
    assert {module for module, _ in COMMANDS.values()} & modules == {"service.cli.sample"}
    assert heavy(modules) == []


def test_command_table_matches_what_the_modules_register():
    import service.cli

    # every sub-command module is in the table (a module missing from it would vanish from the CLI)
    modules = {f"service.cli.{info.name}" for info in pkgutil.iter_modules(service.cli.__path__)}
    with_commands = {m for m in modules if hasattr(importlib.import_module(m), "register")}
    assert with_commands == {module for module, _ in COMMANDS.values()}
    registered = {}
    for module in sorted(with_commands):
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        registered |= {action.dest: (module, action.help) for action in sub._choices_actions}
    assert registered == COMMANDS


def test_create_app_imports_no_numba_or_scipy_extensions(tmp_path):
    code = ("from service.app import create_app; from service.settings import Settings; "
            f"app = create_app(Settings(data_dir={str(tmp_path)!r})); "
            "print(sorted(app.openapi()['paths']))")
    modules, routes = loaded_modules(code)
    assert heavy(modules) == []
    for kind in ("peaks", "compress", "decompress", "cp-conv", "tucker-conv"):
        assert f"'/v1/jobs/{kind}'" in routes


# What a local CPU peaks job has no use for: the service (web framework, queue, server settings).
SERVICE_ONLY = ("fastapi", "starlette", "uvicorn", "celery", "kombu", "redis", "pydantic_settings", "asyncio")


def test_one_run_voxel_commands_run_numpys_blas_on_one_thread_unless_told_otherwise():
    """OpenBLAS reads OPENBLAS_NUM_THREADS as numpy loads: the peaks, fod, response and fixels
    commands set it before, where the user has not; other commands leave it (a batch sets its
    worker processes')."""
    probe = ("import os\ntry:\n    from service.cli import main; main({!r})\nexcept SystemExit:\n    pass\n"
             "print(os.environ.get('OPENBLAS_NUM_THREADS'))")
    environ = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    seen = []
    for args, extra in ((["peaks", "--help"], {}), (["batch", "peaks", "--help"], {}), (["compress", "--help"], {}),
                        (["batch", "fod", "--help"], {}), (["fod", "--help"], {}), (["response", "--help"], {}),
                        (["peaks", "--help"], {"OPENBLAS_NUM_THREADS": "3"})):
        done = subprocess.run([sys.executable, "-c", probe.format(args)], cwd=ROOT, capture_output=True, text=True,
                              check=True, env={**environ, **extra, "PYTHONPATH": str(ROOT)})
        seen.append(done.stdout.split()[-1])
    assert seen == ["1", "None", "None", "None", "1", "1", "3"]


def test_one_run_commands_skip_pydantics_plugin_search_unless_told_otherwise():
    """pydantic looks for plugins in every installed distribution's entry points when it builds
    its first model, unless PYDANTIC_DISABLE_PLUGINS says not to: a command that runs once
    sets it, where the user has not, and builds its parameter model without the search; the
    service's commands leave it."""
    probe = ("import os, sys\ntry:\n    from service.cli import main; main({!r})\nexcept SystemExit:\n    pass\n"
             "from pydantic.plugin import _loader\n"
             "print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'), 'searched' if _loader._plugins is not None else "
             "'not searched', 'worker.params.peaks' in sys.modules)")
    environ = {name: value for name, value in os.environ.items() if name != "PYDANTIC_DISABLE_PLUGINS"}
    seen = []
    for args, extra in ((["peaks", "--help"], {}), (["fixels", "--help"], {}), (["serve", "--help"], {}),
                        (["worker", "--help"], {}), (["peaks", "--help"], {"PYDANTIC_DISABLE_PLUGINS": "logfire"})):
        done = subprocess.run([sys.executable, "-c", probe.format(args)], cwd=ROOT, capture_output=True, text=True,
                              check=True, env={**environ, **extra, "PYTHONPATH": str(ROOT)})
        seen.append(done.stdout.splitlines()[-1])
    assert seen == ["__all__ not searched True", "__all__ not searched False", "None searched False",
                    "None searched False", "logfire searched True"]


def test_a_cpu_peaks_job_imports_nothing_of_the_service(tmp_path):
    import nibabel as nib

    from gpu.peaks.phantom import fod_phantom

    # one fiber a voxel, no noise: each voxel's one peak is its fiber
    phantom = fod_phantom((4, 4, 3), 4, fiber_fractions=(1.0, 0.0, 0.0), noise=0.0)
    nib.save(nib.Nifti1Image(phantom["sh"], np.eye(4)), tmp_path / "fod.nii.gz")
    prefix = tmp_path / "out" / "sub"
    modules, _ = loaded_modules(f"from service.cli import main; main(['peaks', {str(tmp_path / 'fod.nii.gz')!r}, "
                             f"{str(prefix)!r}, '--backend', 'cpu', '--quiet'])")
    assert sorted(m for m in modules if m.split(".")[0] in SERVICE_ONLY or m.startswith("service.api")) == []
    assert "service.settings" not in modules and "numba.cuda" not in modules
    # nor another family's job or parameters
    assert sorted(m for m in modules if m.startswith(("worker.jobs.", "worker.params."))
                  and not m.startswith(("worker.jobs.peaks", "worker.params.peaks", "worker.params.base"))) == []
    assert not [m for m in modules if m.startswith(("torch", "tensorly", "dipy", "scipy.special"))]
    assert (np.asarray(nib.load(f"{prefix}_count.nii.gz").dataobj) == 1).all()
    peaks = np.asarray(nib.load(f"{prefix}_peaks.nii.gz").dataobj)[..., :3]
    cosines = np.abs((peaks / np.linalg.norm(peaks, axis=-1, keepdims=True) * phantom["directions"][..., 0, :]).sum(-1))
    assert cosines.min() > np.cos(np.radians(1.0))


def test_a_cpu_peaks_job_loads_one_signature_of_each_compiled_function(tmp_path):
    """A warm job loads each compiled function it uses once from numba's cache, and compiles
    nothing: the QC picture's flipped slices take the rgb pass's signature."""
    from gpu.peaks.phantom import fod_phantom
    import nibabel as nib

    nib.save(nib.Nifti1Image(fod_phantom((5, 4, 3), 4, seed=1)["sh"], np.eye(4)), tmp_path / "fod.nii.gz")
    job = (f"from service.cli import main; main(['peaks', {str(tmp_path / 'fod.nii.gz')!r}, "
           f"{str(tmp_path / 'out' / 'sub')!r}, '--backend', 'cpu', '--quiet'])")
    python(job)  # fills the cache where it is cold
    log = python(job, env={"NUMBA_DEBUG_CACHE": "1"}).stdout.splitlines()
    assert not [line for line in log if line.startswith("[cache] data saved")]
    loaded = [Path(line.split("'")[1]).name.split("-")[0] for line in log if line.startswith("[cache] data loaded")]
    assert sorted(loaded) == ["fodf_metrics_compiled._colour", "fodf_metrics_compiled._voxel_metrics",
                              "qc_raster.rasterize", "sshopm_generated_cpu.sshopm_cpu_m4"]


_RUN_PEAKS = """
import sys
import numpy as np
import pytest
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks

sh = fod_phantom((5,), 2, seed=3)["sh"]
volume_f32 = np.asfortranarray(sh.reshape(5, 1, 1, -1))  # as a NIfTI volume is stored
one = sshopm_peaks(volume_f32, backend="cpu")
two = sshopm_peaks(sh.astype(np.float64), backend="cpu", chunk_voxels=2)
np.save(sys.argv[1], np.stack([one.amplitudes.reshape(5, -1), two.amplitudes]))
print("numba.cuda imported:", "numba.cuda" in sys.modules)
"""


def test_first_compile_is_announced_once_then_the_cache_serves_every_layout(tmp_path):
    cold = python(_RUN_PEAKS, str(tmp_path / "cold.npy"), env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    assert "lmax-2 SS-HOPM CPU loop" in cold.stderr and "fibertensor warmup" in cold.stderr
    # a float32 Fortran-ordered volume and a chunked float64 one share one compiled loop
    warm = python(_RUN_PEAKS, str(tmp_path / "warm.npy"), env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert NOTICE not in warm.stderr
    assert "numba.cuda imported: False" in warm.stdout  # the CPU backend never loads the CUDA kernels
    amplitudes = np.load(tmp_path / "warm.npy")
    np.testing.assert_array_equal(amplitudes[0], amplitudes[1])
    np.testing.assert_array_equal(np.load(tmp_path / "cold.npy"), amplitudes)
    assert np.isfinite(amplitudes[:, :, 0]).all()


def test_warmup_command_fills_the_cache(tmp_path):
    # numba's code, which later jobs load (tests/gpu/test_ahead_of_time.py: the build beside it)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "FIBERTENSOR_KERNEL_CACHE": str(tmp_path / "kernels")}
    done = python("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "peaks",
                  "--lmax", "2", "--no-ahead-of-time", env=env)
    assert "peaks lmax  2 (cpu)" in done.stdout
    assert NOTICE not in done.stderr
    assert list((tmp_path / "cache").rglob("sshopm_generated_cpu.sshopm_cpu_m2-*.nbi"))
    assert "peaks writers: QC picture rasterizer, fODF metrics (cpu)" in done.stdout
    assert "peaks .pam5 writer (cpu)" in done.stdout
    assert list((tmp_path / "cache").rglob("qc_raster.rasterize-*.nbi"))
    assert list((tmp_path / "cache").rglob("fodf_metrics_compiled._voxel_metrics-*.nbi"))
    assert list((tmp_path / "cache").rglob("fodf_metrics_compiled._colour-*.nbi"))
    compiled = sorted((tmp_path / "cache").rglob("*.nbc"))
    check = python(_RUN_PEAKS, str(tmp_path / "after.npy"), env=env)
    assert NOTICE not in check.stderr
    assert sorted((tmp_path / "cache").rglob("*.nbc")) == compiled  # nothing compiled after the warm-up
    assert np.isfinite(np.load(tmp_path / "after.npy")[:, :, 0]).all()
    # nor by a job with every default output (fODF metrics, QC picture) and a .pam5 on a NIfTI FOD
    from gpu.peaks.phantom import fod_phantom
    import nibabel as nib

    nib.save(nib.Nifti1Image(fod_phantom((5, 4, 3), 2, seed=1)["sh"], np.eye(4)), tmp_path / "fod.nii.gz")
    job = python("from service.cli import main; main()", "peaks", str(tmp_path / "fod.nii.gz"),
                 str(tmp_path / "out" / "sub"), "--backend", "cpu", "--format", "nifti,pam5", env=env)
    assert NOTICE not in job.stderr and (tmp_path / "out" / "sub_qc.png").is_file()
    assert (tmp_path / "out" / "sub_peaks.pam5").is_file()
    assert sorted((tmp_path / "cache").rglob("*.nbc")) == compiled


_RUN_CONV = """
import numpy as np
import pytest
from gpu.conv.cp import cp_conv2d
from gpu.conv.direct import cp_kernel, direct_conv2d

rng = np.random.default_rng(0)
x = rng.normal(size=(1, 3, 6, 7)).astype(np.float32)
s, h, w, t = (rng.normal(size=(n, 2)).astype(np.float32) for n in (3, 3, 3, 4))
ours = cp_conv2d(x, s, h, w, t, padding=1, backend="cpu")
print(np.abs(ours - direct_conv2d(x.astype(np.float64), cp_kernel(s, h, w, t), padding=1)).max())
"""


def test_conv_warmup_fills_the_cache_with_the_cpu_loops(tmp_path):
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "FIBERTENSOR_KERNEL_CACHE": str(tmp_path / "kernels")}
    done = python("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "conv", env=env)
    assert "conv (cpu)" in done.stdout
    assert NOTICE not in done.stderr
    for loop in ("cp._cp_conv_cpu", "tucker._core_conv_cpu"):
        assert list((tmp_path / "cache").rglob(f"{loop}-*.nbi")), loop
    compiled = sorted((tmp_path / "cache").rglob("*.nbc"))
    # a later process runs on what the warm-up compiled (it adds no code to the cache) and
    # gets the float64 reference
    assert float(python(_RUN_CONV, env=env).stdout) < 1e-4
    assert sorted((tmp_path / "cache").rglob("*.nbc")) == compiled


def _cold_then_warm(code: str, tmp_path, announced: str) -> tuple[str, str]:
    """``code``'s stdout in a process on an empty numba cache, which must announce its one
    compile as ``announced``, then in a second process, which must announce none."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "FIBERTENSOR_KERNEL_CACHE": str(tmp_path / "kernels")}
    cold = python(code, env=env)
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    assert announced in cold.stderr and "fibertensor warmup" in cold.stderr, cold.stderr
    warm = python(code, env=env)
    assert NOTICE not in warm.stderr, warm.stderr
    return cold.stdout, warm.stdout


def test_a_conv_loops_first_compile_is_announced_once(tmp_path):
    cold, warm = _cold_then_warm(_RUN_CONV, tmp_path, "compiling the CPU conv kernel _cp_conv_cpu into numba's cache "
                                 "(first use; 3 s on an idle 2-core machine, several times that on busy cores)")
    assert float(cold) < 1e-4 and float(warm) < 1e-4


_RUN_FIXELS = """
import numpy as np
from gpu.fixels.segment import segment_fods
from gpu.peaks.phantom import fod_phantom

fixels = segment_fods(fod_phantom((2, 2, 1), 8, seed=1)["sh"].astype(np.float32), backend="cpu")
print(fixels.afd.size)
"""


def test_the_fmls_loops_first_compile_is_announced_once(tmp_path):
    cold, warm = _cold_then_warm(_RUN_FIXELS, tmp_path, "compiling the FMLS CPU loop into numba's cache (first use; "
                                 "17 s on an idle 2-core machine, several times that on busy cores)")
    assert warm == cold and int(cold) > 0


_FAMILY_COMMANDS = {
    "fod": (["fod", "{bad}", "{tmp}/out/", "--bval", "{bval}", "--bvec", "{bvec}"], "worker.jobs.fod"),
    "response": (["response", "{bad}", "{tmp}/out/", "--bval", "{bval}", "--bvec", "{bvec}"], "worker.jobs.fod"),
    "fixels": (["fixels", "{bad}", "{tmp}/out"], "worker.jobs.fixels"),
    "compress": (["compress", "{bad}", "{tmp}/out.npz"], "worker.jobs.compress"),
    "decompress": (["decompress", "{bad}", "{tmp}/out.nii"], "worker.jobs.compress"),
    "conv": (["conv", "cp", "--input", "{bad}", "--kernel", "{bad}", "--out", "{tmp}/out.npy"], "worker.jobs.conv"),
    "peaks": (["peaks", "{bad}", "{tmp}/out"], "worker.jobs.peaks"),
}


@pytest.mark.parametrize("command", sorted(_FAMILY_COMMANDS))
def test_a_command_checks_its_inputs_without_loading_the_other_families(tmp_path, command):
    """Each command refuses a damaged input through its own family's job kind: the registry
    would import every family's job modules (and what they load) first."""
    (tmp_path / "bad.nii.gz").write_bytes(b"not an image")
    (tmp_path / "b.bval").write_text("0 1000\n")
    (tmp_path / "b.bvec").write_text("1 0\n0 1\n0 0\n")
    words, family = _FAMILY_COMMANDS[command]
    paths = {"bad": tmp_path / "bad.nii.gz", "tmp": tmp_path, "bval": tmp_path / "b.bval", "bvec": tmp_path / "b.bvec"}
    code = ("import json, sys\nfrom service.cli import main\ncode = main(sys.argv[1:])\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith('worker.jobs.'))]))")
    done = python(code, *(word.format(**paths) for word in words))
    returned, loaded = json.loads(done.stdout.splitlines()[-1])
    assert returned == 2 and "Not gzip-compressed" in done.stderr
    assert loaded and all(name.startswith(family) for name in loaded), loaded
