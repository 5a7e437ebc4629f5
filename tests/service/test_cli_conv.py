"""``fibertensor decompose`` and ``fibertensor conv`` end to end (in-process CLI)."""

import json

import numpy as np
import pytest

from gpu.conv.direct import direct_conv2d
from service.cli import main


@pytest.fixture
def layer(tmp_path):
    rng = np.random.default_rng(3)
    # a kernel of exact CP rank 2 and full Tucker ranks, so both decompositions are exact
    s, h, w, t = (rng.standard_normal((d, 2)) for d in (5, 3, 3, 4))
    kernel = np.einsum("tr,sr,hr,wr->tshw", t, s, h, w).astype(np.float32)
    np.save(tmp_path / "k.npy", kernel)
    np.save(tmp_path / "b.npy", rng.standard_normal(4).astype(np.float32))
    np.save(tmp_path / "u.npy", rng.standard_normal((2, 5, 10, 9)).astype(np.float32))
    return tmp_path, kernel


@pytest.mark.parametrize("family, rank_args", [("cp", ["--rank", "2"]), ("tucker", ["--rank-in", "5", "--rank-out", "4"])])
def test_decompose_then_conv_equals_direct_conv_of_the_kernel(layer, capsys, family, rank_args):
    d, kernel = layer
    assert main(["decompose", family, "--kernel", str(d / "k.npy"), *rank_args, "--bias", str(d / "b.npy"),
                 "--out", str(d / "f.npz")]) == 0
    assert "relative error" in capsys.readouterr().out
    assert main(["conv", family, "--input", str(d / "u.npy"), "--factors", str(d / "f.npz"), "--out", str(d / "y.npy"),
                 "--stride", "2", "--padding", "1", "--dilation", "2", "--backend", "cpu"]) == 0
    u, bias = np.load(d / "u.npy"), np.load(d / "b.npy")
    ref = direct_conv2d(u, kernel, bias, 2, 1, 2)
    out = np.load(d / "y.npy")
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-5
    side = json.loads((d / "y.json").read_text())
    assert side["job"] == f"{family}-conv" and side["backend"] == "cpu"


def test_conv_with_a_dense_kernel_reports_the_decomposition_error(layer, capsys):
    d, kernel = layer
    assert main(["conv", "cp", "--input", str(d / "u.npy"), "--kernel", str(d / "k.npy"), "--rank", "2",
                 "--out", str(d / "y.npy")]) == 0
    assert "decomposition error" in capsys.readouterr().err
    ref = direct_conv2d(np.load(d / "u.npy"), kernel, None, 1, "same", 1)
    assert np.abs(np.load(d / "y.npy") - ref).max() / np.abs(ref).max() < 1e-5


@pytest.mark.parametrize(
    "argv, message",
    [
        (["conv", "cp", "--factors", "{d}/missing.npz"], "does not exist"),
        (["conv", "cp", "--kernel", "{d}/k.npy"], "give rank"),
        (["conv", "cp", "--kernel", "{d}/k.npy", "--rank", "2", "--stride", "2"], "--padding: padding 'same' needs stride 1"),
        (["conv", "tucker", "--kernel", "{d}/k.npy", "--rank-in", "9", "--rank-out", "4"], "rank_in must be at most 5"),
        (["conv", "cp", "--kernel", "{d}/k.npy", "--rank", "0"], "--rank: Input should be greater than or equal to 1 (got 0)"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(layer, capsys, argv, message):
    d, _ = layer
    argv = [a.format(d=d) for a in argv] + ["--input", str(d / "u.npy"), "--out", str(d / "y.npy")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fibertensor: error:") and message in err
    assert not (d / "y.npy").exists()
