"""b-value shells as MRtrix3 finds them (``DWI::Shells``, ``core/dwi/shells.cpp``).

Volumes with b ≤ 10 s/mm² form the b=0 shell. The others are clustered by DBSCAN on the
b-value: neighbours lie within 80 s/mm², a cluster grows through volumes with at least 3
neighbours (each its own neighbour), and a volume with fewer that no cluster reaches is
left out of every shell. Shells are sorted by mean b-value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BZERO_THRESHOLD", "SHELL_EPSILON", "MIN_LINKAGE", "Shell", "dw_shells", "select_shells"]

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


def _shell_stats(shell: Shell, bvals: np.ndarray) -> tuple[float, float, float]:
    """(min, max, standard deviation) of a shell's b-values (the deviation over n − 1)."""
    values = bvals[shell.volumes]
    stdev = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return float(values.min()), float(values.max()), stdev


def select_shells(shells: list[Shell], bvals: np.ndarray, wanted: list[float]) -> tuple[list[Shell], list[str]]:
    """The shells ``-shells`` picks in MRtrix3 (``Shells::select_shells``): for each wanted
    b-value, the b=0 shell when it is ≤ 10; else the shell whose b-values span it, else the
    one whose mean lies within 1 of it, else the nearest in standard deviations of each
    shell (of √mean where a shell's deviation is below 1), if no other is within ten times
    as many (a warning names the shell taken).

    Parameters
    ----------
    shells : list of Shell
        :func:`dw_shells` of ``bvals``.
    bvals : (n,) array
    wanted : list of float
        Approximate b-values; b=0 counts only when listed.

    Returns
    -------
    selected : list of Shell
        In ``shells``' order.
    warnings : list of str

    Raises
    ------
    ValueError
        A negative b-value, a shell asked for twice, b=0 asked for without b=0 volumes, a
        b-value no shell can be told for.
    """
    bvals = np.asarray(bvals, np.float64)
    stats = [_shell_stats(s, bvals) for s in shells]
    keep = [False] * len(shells)
    warnings = []

    def take(index: int, b: float) -> None:
        if keep[index]:
            raise ValueError(f"b = {b:g} asks for the shell b = {shells[index].mean_b:g} a second time; list each "
                             "shell once")
        keep[index] = True

    for b in wanted:
        if b < 0:
            raise ValueError(f"b = {b:g} is negative; shells are chosen by their b-values (s/mm², b = 0 included)")
        if b <= BZERO_THRESHOLD:
            if not shells or not shells[0].is_bzero:
                raise ValueError(f"b = {b:g} asks for the b=0 volumes, but the DWI has none")
            take(0, b)
            continue
        spanning = [i for i, s in enumerate(shells) if not s.is_bzero and stats[i][0] <= b <= stats[i][1]]
        if spanning:
            for i in spanning:
                take(i, b)
            continue
        close = [i for i, s in enumerate(shells) if abs(b - s.mean_b) <= 1.0]
        if len(close) == 1:
            take(close[0], b)
            continue
        # a shell's spread: its deviation, or √mean where some shell's is below 1 (as MRtrix3)
        flat = any(not s.is_bzero and stat[2] < 1.0 for s, stat in zip(shells, stats))
        distances = []
        for s, stat in zip(shells, stats):
            spread = 0.5 * BZERO_THRESHOLD if s.is_bzero else (np.sqrt(s.mean_b) if flat else stat[2])
            distances.append(abs(b - s.mean_b) / spread)
        order = np.argsort(distances, kind="stable")
        best = int(order[0])
        if len(order) > 1 and distances[order[1]] < 10.0 * distances[best]:
            described = ", ".join(f"{s.mean_b:g} ± {stat[2]:.3g}" for s, stat in zip(shells, stats))
            raise ValueError(f"b = {b:g} lies between shells, none clearly nearest (the DWI's shells: {described}); "
                             "give the b-value of one of them")
        warnings.append(f"shell b = {b:g} asked for; took the nearby shell b = {shells[best].mean_b:g}")
        take(best, b)
    return [s for s, k in zip(shells, keep) if k], warnings
