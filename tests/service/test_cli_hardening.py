"""The local commands refuse what the API refuses (bad headers, a GPU that is not there, a
.mih whose data lies elsewhere) with exit code 2 and the API's message; the client sends
its API key to its own server only, and writes results only into the folder it was given."""

from __future__ import annotations

import hashlib

import httpx
import nibabel as nib
import numpy as np
import pytest

import gpu.cuda.device
import gpu.cuda.simulator
from gpu.peaks.phantom import fod_phantom
from service.cli import CommandError, main
from service.cli.client import ServiceClient
from service.cli.input_checks import check_inputs
from service.settings import get_settings
from tests.service.test_cli_limits import error_line
from tests.worker.io.test_data_files import linked_mih
from tests.worker.io.test_voxel_grid import raw_nifti
from worker.jobs.peaks import JOB_KINDS
from worker.params.peaks import PeaksParams

FOD = fod_phantom((3, 3, 2), lmax=4, seed=3)["sh"].astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_settings():
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_nan_pixdim_exits_2_with_the_apis_message(tmp_path, capsys):
    header = nib.Nifti1Header()
    header.set_sform(np.eye(4), code=1)
    header["pixdim"][3] = np.inf
    path = raw_nifti(tmp_path / "nan.nii", header, FOD)
    assert error_line(["peaks", path, tmp_path / "out"], capsys) == (
        "fibertensor: error: Invalid affine: the fod file 'nan.nii' has voxel sizes [1.0, 1.0, inf] that are "
        "not all numbers; fix its header (pixdim, sform and qform, e.g. with nibabel or mrconvert from the "
        "scanner's data) and send it again"
    )
    assert not (tmp_path / "out").exists()


def test_backend_cuda_without_a_gpu_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu.cuda.simulator, "simulator_active", lambda: False)
    monkeypatch.setattr(gpu.cuda.device, "cuda_available", lambda: False)
    path = raw_nifti(tmp_path / "fod.nii", nib.Nifti1Header(), FOD)
    assert error_line(["peaks", path, tmp_path / "out", "--backend", "cuda"], capsys) == (
        "fibertensor: error: No GPU for backend cuda: backend 'cuda' was asked for, but the machine that runs "
        "this job has no usable CUDA GPU; use backend auto (the GPU where there is one, else the CPU) or cpu"
    )


def test_zero_sform_with_a_qform_is_checked_with_a_warning(tmp_path, capsys):
    header = nib.Nifti1Header()
    header.set_qform(np.diag([2.0, 2.0, 2.0, 1.0]), code=1)
    header["sform_code"] = 1
    path = raw_nifti(tmp_path / "fod.nii", header, FOD)
    (kind,) = JOB_KINDS
    check_inputs(kind, {"fod": path, "mask": None}, PeaksParams(), read_through=False)
    assert capsys.readouterr().err == (
        "fibertensor: warning: the fod file 'fod.nii' has a voxel-to-scanner transform that collapses an axis "
        "(a zero or degenerate matrix) in its sform; its qform was used instead. Check the result's "
        "orientation, and fix the input's sform\n"
    )


def test_mih_whose_data_links_outside_its_folder_exits_2(tmp_path, capsys):
    header = linked_mih(tmp_path, FOD)
    assert error_line(["peaks", header, tmp_path / "out"], capsys) == (
        "fibertensor: error: Data file outside the header's folder: the fod file 'fod.mih' keeps its data in "
        "'fod.dat', a link to a file in another folder; put the data file itself beside the header, or make "
        "one file of both with mrconvert fod.mih fod.mif"
    )


def _client(server: str, seen: list[httpx.Request]) -> ServiceClient:
    client = ServiceClient(server, "secret-key")

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"peaks")

    client.http = httpx.Client(base_url=client.server, headers=client.http.headers, transport=httpx.MockTransport(answer))
    return client


SHA = hashlib.sha256(b"peaks").hexdigest()


@pytest.mark.parametrize("url", ["http://evil.example/v1/jobs/1/results/peaks.nii.gz",
                                 "https://service.example:8000/x", "//evil.example/x"])
def test_client_sends_its_key_to_no_other_origin(tmp_path, url):
    seen: list[httpx.Request] = []
    with _client("http://service.example:8000", seen) as client:
        with pytest.raises(CommandError) as caught:
            client.download({"name": "peaks.nii.gz", "url": url, "sha256": SHA}, tmp_path)
    assert str(caught.value).startswith("the service at http://service.example:8000 pointed a download at ")
    assert "refused, so that the API key goes nowhere else" in str(caught.value)
    assert seen == [] and list(tmp_path.iterdir()) == []


def test_client_resolves_a_path_against_its_server_and_keeps_names_in_the_folder(tmp_path):
    seen: list[httpx.Request] = []
    sha = SHA
    with _client("http://service.example:8000", seen) as client:
        path = client.download({"name": "peaks.nii.gz", "url": "/v1/jobs/1/results/peaks.nii.gz", "sha256": sha},
                               tmp_path)
        same_origin = {"name": "b.nii.gz", "url": "http://service.example:8000/v1/jobs/1/results/b.nii.gz",
                       "sha256": sha}
        client.download(same_origin, tmp_path)
        with pytest.raises(CommandError, match="which is not a file name"):
            client.download({"name": "../escape.txt", "url": "/x", "sha256": sha}, tmp_path)
    assert path.read_bytes() == b"peaks"
    assert [str(r.url) for r in seen] == ["http://service.example:8000/v1/jobs/1/results/peaks.nii.gz",
                                          "http://service.example:8000/v1/jobs/1/results/b.nii.gz"]
    assert all(r.headers["x-api-key"] == "secret-key" for r in seen)
    assert not (tmp_path.parent / "escape.txt").exists()


def test_trailing_megabytes_after_a_nii_exit_2_as_after_a_nii_gz(tmp_path, capsys):
    path = raw_nifti(tmp_path / "fod.nii", nib.Nifti1Header(), FOD, extra=bytes(3 << 20))
    assert error_line(["peaks", path, tmp_path / "out"], capsys) == (
        f"fibertensor: error: Input larger than its header: {path}: the file holds {3 << 20} bytes past the "
        f"image data its header declares, more than the {1 << 20} bytes of padding allowed; the file is "
        "damaged, write it again"
    )


def test_mif_transform_of_1e300_exits_2(tmp_path, capsys):
    from tests.worker.io.test_voxel_grid import mif_text

    path = tmp_path / "fod.mif"
    path.write_bytes(mif_text(["1,0,0,0", "0,1e300,0,0", "0,0,1,0"]))
    assert error_line(["peaks", path, tmp_path / "out"], capsys).startswith(
        "fibertensor: error: Invalid MRtrix image header: the fod file 'fod.mif' has a voxel-to-scanner "
        "transform or voxel sizes beyond 1e+06 mm; write it again with MRtrix3"
    )


def test_a_submit_waits_out_429_and_503_with_retry_after_and_gives_up_on_other_refusals(tmp_path, monkeypatch):
    fod = tmp_path / "fod.nii.gz"
    fod.write_bytes(b"not read by the fake server")
    answers = [httpx.Response(429, json={"title": "Too many uploads", "status": 429, "detail": "wait"},
                              headers={"Retry-After": "2"}),
               httpx.Response(503, json={"title": "Busy", "status": 503, "detail": "wait"},
                              headers={"Retry-After": "1"}),
               httpx.Response(202, json={"id": "j1"})]
    bodies: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(request.read())
        return answers.pop(0)

    waits: list[float] = []
    monkeypatch.setattr("service.cli.client.time.sleep", waits.append)
    client = ServiceClient("http://127.0.0.1:9", None)
    client.http = httpx.Client(base_url=client.server, transport=httpx.MockTransport(answer))
    assert client.submit("peaks", {"fod": fod}, {}) == {"id": "j1"}
    assert waits == [2.0, 1.0]
    # every attempt sends the whole file again (each with a boundary of its own)
    assert len(bodies) == 3 and all(body.count(b"not read by the fake server") == 1 for body in bodies)

    refused = httpx.Response(422, json={"title": "Bad input", "status": 422, "detail": "fix it"})
    client.http = httpx.Client(base_url=client.server, transport=httpx.MockTransport(lambda request: refused))
    with pytest.raises(CommandError, match="422 Bad input: fix it"):
        client.submit("peaks", {"fod": fod}, {})
    assert waits == [2.0, 1.0]


def _write_fod(path):
    image = nib.Nifti1Image(FOD, np.eye(4))
    image.set_sform(np.eye(4), code=1)
    nib.save(image, path)
    return path


@pytest.mark.parametrize("command", ["peaks", "fixels"])
@pytest.mark.parametrize("where", ["under a file", "a pseudo file system"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_read(command, where, tmp_path, capsys,
                                                                            monkeypatch):
    """Where the outputs cannot go (a file where a folder should be, /proc), the command
    says so at the door (exit 2), before it reads its input."""
    from worker.io import images

    fod = _write_fod(tmp_path / "fod.nii")
    monkeypatch.setattr(images, "load_image_data", lambda *a, **k: pytest.fail("the input was read"))
    out = tmp_path / "fod.nii" / "sub" / "out" if where == "under a file" else "/proc/fibertensor-out/out"
    message = error_line([command, fod, out, "--backend", "cpu", "--quiet"], capsys)
    role = "OUT_PREFIX" if command == "peaks" else "OUT_DIR"
    if where == "under a file":
        assert message.endswith(f"that {role} needs cannot be made: '{fod}' is a file; choose another {role}")
    else:
        assert message.endswith(f"cannot write in '/proc' (No such file or directory), where {role} goes; "
                                "choose a folder you can write to")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii"]


@pytest.mark.parametrize("command, role", [("batch", "--out-dir"), ("compress", "output")])
def test_batch_and_compress_check_their_output_folder_too(command, role, tmp_path, capsys):
    fod = _write_fod(tmp_path / "fod.nii")
    argv = (["batch", "peaks", fod, "--out-dir", "/proc/fibertensor-out", "--backend", "cpu"] if command == "batch"
            else ["compress", fod, "/proc/fibertensor-out/fod.npz", "--tol", "0.01"])
    assert error_line(argv, capsys).endswith(f"cannot write in '/proc' (No such file or directory), where {role} "
                                            "goes; choose a folder you can write to")


def test_a_full_disk_while_writing_is_an_error_that_names_the_file(small_filesystem, tmp_path, capsys):
    """A disk that fills while the outputs are written: one line naming the file (exit 1),
    not a traceback, and no output left (each file is written beside its name and renamed)."""
    fod = _write_fod(tmp_path / "fod.nii")
    disk = small_filesystem(1)
    with open(disk / "filler", "wb") as filler:  # all but a few KiB of the 1 MiB
        filler.write(b"\0" * (1024 * 1024 - 8192))
    assert main(["peaks", str(fod), str(disk / "sub"), "--backend", "cpu", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fibertensor: error: No space left on device: {disk}/"), err
    assert err[0].endswith("; free space there or write elsewhere")
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_a_closed_pipe_ends_a_command_quietly(tmp_path, capsys, monkeypatch):
    """Output piped into a reader that stopped (``| head``): exit 141, as a SIGPIPE would, and
    no error line."""
    from service.cli import peaks

    def pipe_closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(peaks, "_peaks", pipe_closed)
    assert main(["peaks", str(tmp_path / "fod.nii"), str(tmp_path / "out")]) == 141
    assert capsys.readouterr().err == ""
