"""MRtrix3's fixels as references: ``fod2fixel`` run on an FOD, its directory read back, and
two fixel sets matched voxel by voxel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from worker.io.images import load_image_data, read_image_header
from worker.io.mif import load_mif_data, read_mif_header

#: ``dwi2response tournier`` of small_64D (MRtrix3 3.0.3, defaults).
TOURNIER_RESPONSE = Path(__file__).resolve().parents[1] / "fod" / "data" / "small_64D_wm_tournier.txt"

__all__ = ["run_fod2fixel", "read_fixel_file", "read_fixel_directory", "fixel_differences", "real_fod"]


def run_fod2fixel(fod: Path, out: Path, *options: str) -> Path:
    """``fod2fixel FOD OUT -afd afd.mif -peak_amp peak_amp.mif -disp disp.mif OPTIONS``."""
    subprocess.run(["fod2fixel", "-quiet", str(fod), str(out), "-afd", "afd.mif", "-peak_amp", "peak_amp.mif",
                    "-disp", "disp.mif", *options], check=True)
    return out


def read_fixel_file(path: Path) -> np.ndarray:
    """A fixel data file (N, M, 1) in fixel order. fod2fixel gives these files the FOD's
    transform, so the image reader would run the fixel axis the way the FOD's x axis is
    stored; here it runs in index order."""
    info = read_mif_header(path)
    data = load_mif_data(info, None)
    for i, axis in enumerate(info.axes[:3]):
        if info.layout[axis] < 0:
            data = np.flip(data, i)
    return data.transpose(np.argsort(info.axes)).reshape(info.dims[0], -1)


def read_fixel_directory(folder: Path) -> dict[str, np.ndarray]:
    """index (X, Y, Z, 2) on the image reader's grid (as the FOD it came from), directions
    (N, 3) and each of afd, peak_amp, disp (N,)."""
    out = {"index": load_image_data(read_image_header(folder / "index.mif", "index"), None)}
    out["directions"] = read_fixel_file(folder / "directions.mif")
    for name in ("afd", "peak_amp", "disp"):
        out[name] = read_fixel_file(folder / f"{name}.mif")[:, 0]
    return out


def fixel_differences(reference: dict[str, np.ndarray], ours) -> dict[str, np.ndarray]:
    """Voxels with the same fixel count, and for their fixels, matched in order: the angle
    between directions (degrees, sign-blind) and the relative differences of afd, peak_amp
    and disp."""
    count_ref, count_ours = reference["index"][..., 0], ours.index[..., 0]
    same = count_ref == count_ours
    angles, rel = [], {name: [] for name in ("afd", "peak_amp", "disp")}
    for voxel in zip(*np.nonzero(same & (count_ref > 0))):
        n, first_ref = (int(v) for v in reference["index"][voxel])
        first_ours = int(ours.index[voxel][1])
        a = reference["directions"][first_ref:first_ref + n].astype(np.float64)
        b = ours.directions[first_ours:first_ours + n].astype(np.float64)
        cross = np.linalg.norm(np.cross(a, b), axis=1)
        angles.append(np.degrees(np.arctan2(cross, np.abs(np.sum(a * b, axis=1)))))
        for name in rel:
            r = reference[name][first_ref:first_ref + n].astype(np.float64)
            o = getattr(ours, name)[first_ours:first_ours + n].astype(np.float64)
            rel[name].append(np.abs(o - r) / np.abs(r))
    return {"same_count": same.mean(), "n_fixels": int(count_ref.sum()),
            "angle": np.concatenate(angles), **{k: np.concatenate(v) for k, v in rel.items()}}


def real_fod(folder: Path) -> Path:
    """A CSD FOD (lmax 8) of DIPY's small_64D (10×10×10 voxels, b = 1000, 64 directions, shipped
    with DIPY): ``dwi2fod csd`` with the response ``dwi2response tournier`` gives on it (stored
    in tests/gpu/fod/data, since the script takes a minute)."""
    from dipy.data import get_fnames

    dwi, bval, bvec = get_fnames(name="small_64D")
    fod = folder / "fod.mif"
    subprocess.run(["dwi2fod", "csd", "-quiet", "-fslgrad", str(bvec), str(bval), str(dwi), str(TOURNIER_RESPONSE),
                    str(fod)], check=True)
    return fod
