"""Lobe merging (``lobe_merge_ratio`` < 1), which MRtrix3 3.0.3's ``fod2fixel`` ignores (it
reads the option under another name), against a literal float64 transcription of MRtrix3's
``FMLS::Segmenter`` (src/dwi/fmls.cpp, current source): samples sorted by |amplitude| with
negative lobes grown too, lobes in a list that merges erase from, and pending assignments
renumbered after each erase. The Newton step is the engine's own (compared with fod2fixel
in test_segment_vs_mrtrix)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.fixels import fmls_math as fm
from gpu.fixels.fmls_tables import fmls_tables
from gpu.fixels.segment import FmlsOptions, segment_fods
from gpu.peaks.phantom import fod_phantom


class Lobe:
    def __init__(self, unit, d, value, weight):
        self.mask = {d}
        self.peak = abs(value)
        self.peaks = [unit[d].copy()]
        self.mean = unit[d] * abs(value) * weight
        self.integral = abs(value * weight)
        self.negative = value <= 0.0

    def add(self, unit, d, value, weight):
        self.mask.add(d)
        self.mean = self.mean + unit[d] * (1.0 if self.mean @ unit[d] > 0.0 else -1.0) * abs(value) * weight
        self.integral += abs(value * weight)

    def merge(self, that):
        self.mask |= that.mask
        if that.peak > self.peak:
            self.peak = that.peak
            self.peaks = that.peaks + self.peaks
        else:
            self.peaks = self.peaks + that.peaks
        self.mean = self.mean + that.mean * that.integral * (1.0 if self.mean @ that.mean > 0.0 else -1.0)
        self.integral += that.integral


def mrtrix_segmenter(sh, tables, ratio, integral_threshold, peak_threshold):
    """[(mean direction, integral, peak value, peak directions)] of one voxel."""
    unit, weights = tables.unit, tables.weights
    neighbours = [set(row[row >= 0]) for row in tables.neighbours]
    if sh[0] <= 0.0:
        return []
    values = tables.sh_to_amp @ sh
    order = sorted(range(len(values)), key=lambda i: -abs(values[i]))
    if values[order[0]] <= 0.0:
        return []
    lobes, retro = [], []
    for d in order:
        v = values[d]
        adj = [l for l, lobe in enumerate(lobes) if (v <= 0.0) == lobe.negative and neighbours[d] & lobe.mask]
        if not adj:
            lobes.append(Lobe(unit, d, v, weights[d]))
        elif len(adj) == 1:
            lobes[adj[0]].add(unit, d, v, weights[d])
        elif abs(v) / lobes[adj[-1]].peak > ratio:
            for j in adj[1:]:
                lobes[adj[0]].merge(lobes[j])
            lobes[adj[0]].add(unit, d, v, weights[d])
            for entry in retro:
                if entry[1] in adj[1:]:
                    entry[1] = adj[0]
                else:
                    entry[1] -= sum(1 for j in adj[1:] if j < entry[1])
            for j in reversed(adj[1:]):
                del lobes[j]
        else:
            retro.append([d, adj[0]])
    for d, l in retro:
        lobes[l].add(unit, d, values[d], weights[d])
    al = np.empty(tables.legendre.shape[1])
    out = []
    for lobe in lobes:
        if lobe.negative or lobe.integral < integral_threshold:
            continue
        for p in range(len(lobe.peaks)):
            value, x, y, z = fm.sh_peak(sh, tables.lmax, *lobe.peaks[p], tables.legendre, tables.legendre_step,
                                        tables.derivative_factors, al)
            if np.isfinite([value, x, y, z]).all():
                new = np.array([x, y, z])
                dots = [abs(new @ q) for q in lobe.peaks]
                # the nearest sampling direction by a scan of all, the first on ties
                nearest = int(np.argmax(np.abs(unit @ new)))
                if int(np.argmax(dots)) == p and nearest in lobe.mask:
                    lobe.peaks[p] = new
                    if p == 0:
                        lobe.peak = value
        if lobe.peak >= peak_threshold:
            out.append((lobe.mean / np.linalg.norm(lobe.mean), lobe.integral, lobe.peak, lobe.peaks[0]))
    return out


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.6])
def test_merging_matches_mrtrix_transcription(ratio):
    fod = fod_phantom((6, 1, 1), 8, relative_noise=0.08, seed=3)["sh"]
    options = FmlsOptions(lobe_merge_ratio=ratio, no_thresholds=True)
    ours = segment_fods(fod, options=options, backend="cpu")
    ours_peak = segment_fods(fod, options=FmlsOptions(lobe_merge_ratio=ratio, no_thresholds=True, dirpeak=True),
                             backend="cpu")
    tables = fmls_tables(8)
    merged = 0
    for x in range(fod.shape[0]):
        expected = mrtrix_segmenter(fod[x, 0, 0].astype(np.float64), tables, ratio, 0.0, 0.0)
        n, first = ours.index[x, 0, 0]
        assert n == len(expected)
        for i, (mean, integral, peak, peak_dir) in enumerate(expected):
            assert abs(ours.directions[first + i] @ mean) == pytest.approx(1.0, abs=1e-6)
            assert abs(ours_peak.directions[first + i] @ peak_dir) == pytest.approx(1.0, abs=1e-6)
            assert ours.afd[first + i] == pytest.approx(integral, rel=1e-6)
            assert ours.peak_amp[first + i] == pytest.approx(peak, rel=1e-6)
        merged += n < len(mrtrix_segmenter(fod[x, 0, 0].astype(np.float64), tables, 1.0, 0.0, 0.0))
    assert merged > 0
