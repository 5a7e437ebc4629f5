"""The group's response against MRtrix3's ``responsemean``."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gpu.fod.response import mean_response

@pytest.mark.requires_mrtrix
def test_mean_response_is_responsemeans_bytes(tmp_path):
    """Three-shell WM responses of four subjects, their l = 0 terms a factor of two apart:
    each is scaled towards the group's l = 0 terms before the mean, as responsemean does by
    default; the same numbers to the last bit, where the plain mean differs."""
    rng = np.random.default_rng(7)
    responses = []
    for index in range(4):
        response = rng.uniform(-400.0, 900.0, (3, 6))
        response[:, 0] = rng.uniform(1000.0, 3000.0, 3) * (1 + index % 2)
        responses.append(response)
        np.savetxt(tmp_path / f"r{index}.txt", response, fmt="%.17g")
    subprocess.run(["responsemean", *(str(tmp_path / f"r{i}.txt") for i in range(4)), str(tmp_path / "mean.txt"),
                    "-quiet"], check=True)
    theirs = np.loadtxt(tmp_path / "mean.txt")
    ours = mean_response(responses)
    assert ours.shape == (3, 6)
    np.testing.assert_array_equal(ours, theirs)
    assert np.abs(np.mean(responses, axis=0) - theirs).max() > 1.0


def test_mean_response_refuses_what_responsemean_cannot_average():
    with pytest.raises(ValueError, match="positive l = 0 term"):
        mean_response([np.array([[1000.0, -5.0]]), np.array([[0.0, -4.0]])])
    with pytest.raises(ValueError, match="one shape"):
        mean_response([np.ones((2, 3)), np.ones((3, 3))])
