"""b-value shells as MRtrix3 finds them (``core/dwi/shells.cpp``): b ≤ ``BZeroThreshold`` is
b=0; the rest cluster by density (DBSCAN-like) with a neighbourhood of ±80 s/mm² and at
least 3 volumes to grow a cluster; shells sort by mean b."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BZERO_THRESHOLD", "SHELL_EPSILON", "MIN_LINKAGE", "Shell", "dw_shells"]

#: MRtrix3's default ``BZeroThreshold`` (s/mm²)
BZERO_THRESHOLD = 10.0
SHELL_EPSILON = 80.0
MIN_LINKAGE = 3


@dataclass(frozen=True)
class Shell:
    """One shell: its ``volumes`` (indices into the scheme, ascending) and mean b."""

    volumes: np.ndarray
    mean_b: float

    @property
    def is_bzero(self) -> bool:
        return self.mean_b < BZERO_THRESHOLD


def _clusters(bvals: np.ndarray) -> tuple[np.ndarray, int]:
    """MRtrix3's ``Shells::clusterBvalues``: cluster index per volume (0 = unassigned, 1 = b=0
    when there is any) and the number of clusters."""
    n = bvals.size
    clusters = np.zeros(n, dtype=np.int64)
    visited = bvals <= BZERO_THRESHOLD
    cluster = 0
    if visited.any():
        clusters[visited] = 1
        cluster = 1
    weighted = bvals > BZERO_THRESHOLD

    def neighbours(b: float) -> list[int]:
        return np.flatnonzero(weighted & (np.abs(b - bvals) < SHELL_EPSILON)).tolist()

    for i in range(n):
        if visited[i]:
            continue
        visited[i] = True
        members = neighbours(bvals[i])
        if len(members) < MIN_LINKAGE:
            continue
        cluster += 1
        clusters[i] = cluster
        k = 0
        while k < len(members):  # the list grows as the cluster's density reaches further
            j = members[k]
            if not visited[j]:
                visited[j] = True
                more = neighbours(bvals[j])
                if len(more) >= MIN_LINKAGE:
                    members.extend(more)
            if clusters[j] == 0:
                clusters[j] = cluster
            k += 1
    return clusters, cluster


def dw_shells(bvals: np.ndarray) -> list[Shell]:
    """The shells of a gradient scheme's b-values, as MRtrix3's ``DWI::Shells``.

    Parameters
    ----------
    bvals : (n,) array
        b-values (s/mm²), column 3 of an MRtrix scheme.

    Returns
    -------
    list of :class:`Shell`, ascending mean b. Volumes in no cluster belong to no shell.

    Raises
    ------
    ValueError
        When the b-values make no shells or more than √n of them (not a shelled HARDI scheme).
    """
    bvals = np.asarray(bvals, dtype=np.float64).ravel()
    clusters, count = _clusters(bvals)
    if count < 1 or count > np.sqrt(bvals.size):
        raise ValueError(
            f"the {bvals.size} b-values could not be grouped into shells ({count} groups found, at most "
            f"√{bvals.size} allowed): the gradient scheme does not look like a HARDI acquisition"
        )
    shells = []
    for c in range(1, count + 1):
        volumes = np.flatnonzero(clusters == c)
        if volumes.size:
            shells.append(Shell(volumes, float(np.mean(bvals[volumes]))))
    return sorted(shells, key=lambda s: s.mean_b)
