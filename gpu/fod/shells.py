"""b-value shells as MRtrix3 finds them (``DWI::Shells``, ``core/dwi/shells.cpp``).

Volumes with b ≤ 10 s/mm² form the b=0 shell. The others are clustered by DBSCAN on the
b-value: neighbours lie within 80 s/mm², a cluster grows through volumes with at least 3
neighbours (each its own neighbour), and a volume with fewer that no cluster reaches is
left out of every shell. Shells are sorted by mean b-value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BZERO_THRESHOLD", "SHELL_EPSILON", "MIN_LINKAGE", "Shell", "dw_shells"]

BZERO_THRESHOLD = 10.0
SHELL_EPSILON = 80.0
MIN_LINKAGE = 3


@dataclass(frozen=True)
class Shell:
    """One shell: its volumes (indices into the scheme, ascending) and mean b-value."""

    volumes: np.ndarray
    mean_b: float

    @property
    def is_bzero(self) -> bool:
        return self.mean_b < BZERO_THRESHOLD


def _clusters(bvals: np.ndarray) -> np.ndarray:
    """Cluster label per volume, 0 for none (MRtrix3's ``clusterBvalues``)."""
    n = bvals.size
    clusters = np.zeros(n, np.int64)
    visited = bvals <= BZERO_THRESHOLD
    label = 0
    if visited.any():
        label = 1
        clusters[visited] = 1
    dw = bvals > BZERO_THRESHOLD

    def neighbours(b: float) -> list[int]:
        return list(np.flatnonzero(dw & (np.abs(b - bvals) < SHELL_EPSILON)))

    for i in range(n):
        if visited[i]:
            continue
        visited[i] = True
        found = neighbours(bvals[i])
        if len(found) < MIN_LINKAGE:  # bvals[i] > threshold here: it is noise for now
            clusters[i] = 0
            continue
        label += 1
        clusters[i] = label
        k = 0
        while k < len(found):
            j = found[k]
            if not visited[j]:
                visited[j] = True
                more = neighbours(bvals[j])
                if len(more) >= MIN_LINKAGE:
                    found.extend(more)
            if clusters[j] == 0:
                clusters[j] = label
            k += 1
    return clusters


def dw_shells(bvals: np.ndarray) -> list[Shell]:
    """The shells of a scheme's b-values (after :func:`gpu.fod.gradient_scheme.normalise_scheme`).

    Parameters
    ----------
    bvals : ndarray, shape (n,)

    Returns
    -------
    list of Shell
        Sorted by mean b-value; a b=0 shell, if any, first.
    """
    bvals = np.asarray(bvals, np.float64)
    clusters = _clusters(bvals)
    count = int(clusters.max())
    if count < 1 or count > np.sqrt(bvals.size):
        raise ValueError(
            f"the {bvals.size} b-values could not be grouped into shells ({count} groups found, at most "
            f"√{bvals.size} allowed): the gradient scheme does not look like a HARDI acquisition"
        )
    shells = []
    for label in range(1, count + 1):
        volumes = np.flatnonzero(clusters == label)
        shells.append(Shell(volumes, float(bvals[volumes].mean())))
    return sorted(shells, key=lambda s: s.mean_b)
