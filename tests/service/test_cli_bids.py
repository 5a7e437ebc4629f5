"""``fibertensor bids``: the BIDS App command line, run here and through a service."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bids import BIDSLayout

from service.cli import main
from tests.integration.processes import free_port, service_env, start_serve, stop
from tests.worker.test_bids import make_dataset, published_files
from worker.io.images import load_image_data, read_image_header


def cli_error(argv, capsys) -> str:
    assert main([str(a) for a in argv]) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def published(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_local_run_of_one_session_with_peaks_options(tmp_path, capsys):
    root = tmp_path / "ds"
    make_dataset(root)
    out = tmp_path / "out"
    argv = ["bids", root, out, "participant", "--participant-label", "01", "--session-label", "2",
            "--npeaks", "2", "--metrics", "afd_max", "--format", "mif", "--backend", "cpu"]
    assert main([str(a) for a in argv]) == 0
    assert capsys.readouterr().out.strip() == f"1 of 1 FODs done; derivatives in {out}"
    stem = "sub-01/ses-2/dwi/sub-01_ses-2_model-csd_"
    assert published(out) == sorted(["dataset_description.json"] + [
        f"{stem}param-{value}_desc-{value}_dwimap{ext}" for value in ("peaks", "amplitudes", "nufo", "afdmax")
        for ext in (".mif.gz", ".json")] + [f"{stem}desc-qc_dwimap.png", f"{stem}desc-qc_dwimap.json"])
    sidecar = json.loads((out / f"{stem}param-afdmax_desc-afdmax_dwimap.json").read_text())
    assert sidecar["Parameters"]["npeaks"] == 2 and sidecar["Parameters"]["format"] == ["mif"]
    # pybids as installed pairs each file with its own sidecar
    images = [f for f in BIDSLayout(out, is_derivative=True).get(suffix="dwimap") if f.entities["extension"] != ".json"]
    assert sorted(f.entities["desc"] for f in images) == ["afdmax", "amplitudes", "nufo", "peaks", "qc"]
    for image in images:
        own = json.loads((out / stem).with_name(image.filename.split(".")[0] + ".json").read_text())
        assert image.get_metadata()["Description"] == own["Description"], image.filename
    assert len({image.get_metadata()["Description"] for image in images}) == 5


def test_errors_say_what_to_fix(tmp_path, capsys):
    root = tmp_path / "ds"
    make_dataset(root)
    line = cli_error(["bids", root, tmp_path / "out", "participant", "--participant-label", "07"], capsys)
    assert "no FOD image of participants 07" in line and "looked for" in line and "_desc-wmfod_" in line
    line = cli_error(["bids", root, tmp_path / "out", "participant", "--metrics", "fa"], capsys)
    assert line.startswith("fibertensor: error: --metrics value 1:")
    line = cli_error(["bids", root, tmp_path / "out", "group"], capsys)
    assert line.endswith("is no folder; give the OUTPUT_DIR of a participant run from DWIs")
    with pytest.raises(SystemExit):
        main(["bids", str(root), str(tmp_path / "out"), "dataset"])
    assert "invalid choice: 'dataset'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_worker_processes_publish_what_one_process_does(tmp_path, capsys):
    root = tmp_path / "ds"
    make_dataset(root)
    options = ["participant", "--npeaks", "2", "--backend", "cpu"]
    assert main([str(a) for a in ["bids", root, tmp_path / "one", *options, "--processes", "1"]]) == 0
    assert main([str(a) for a in ["bids", root, tmp_path / "two", *options, "--processes", "2"]]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == f"4 of 4 FODs done; derivatives in {tmp_path / 'two'}"
    assert sorted(line.split("]")[0] for line in captured.err.splitlines()[-4:]) == [f"[{n}/4" for n in range(1, 5)]
    assert published_files(tmp_path / "two") == published_files(tmp_path / "one")
    # each image names the command that made it, also when a worker process wrote it
    for out, processes in (("one", 1), ("two", 2)):
        entry = f"fibertensor bids {root} {tmp_path / out} {' '.join(options)} --processes {processes}  (version="
        for image in (tmp_path / out).rglob("*.mif.gz"):
            assert read_image_header(image, "image").keyval["command_history"].startswith(entry), image


@pytest.mark.parametrize("options, message", [
    (["--gpus", "0,,1"], "distinct device numbers"), (["--gpus", "1,1"], "distinct device numbers"),
    (["--gpus", "all"], "no CUDA GPU is visible"), (["--processes", "0"], "--processes must be at least 1"),
    (["--processes", "2", "--server", "http://127.0.0.1:9"], "leave them out with --server"),
])
def test_process_and_gpu_options_errors(tmp_path, capsys, options, message):
    root = tmp_path / "ds"
    make_dataset(root)
    assert message in cli_error(["bids", root, tmp_path / "out", "participant", *options], capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_server_run_publishes_what_the_local_run_does(tmp_path):
    root = tmp_path / "ds"
    make_dataset(root)
    options = ["participant", "--participant-label", "02", "--npeaks", "2", "--format", "mif,fixel",
               "--backend", "cpu", "--quiet"]
    assert main(["bids", str(root), str(tmp_path / "local"), *options]) == 0
    port = free_port()
    serve = start_serve(service_env(tmp_path / "data"), tmp_path / "serve.log", port)
    try:
        assert main(["bids", str(root), str(tmp_path / "served"), *options,
                     "--server", f"http://127.0.0.1:{port}"]) == 0
    finally:
        stop(serve, timeout=60)
    local, served = published(tmp_path / "local"), published(tmp_path / "served")
    assert served == local
    assert "sub-02/ses-1/dwi/sub-02_ses-1_space-T1w_param-fixels_desc-fixels_dwimap/index.mif.gz" in served
    for name in served:
        if name.endswith(".mif.gz"):
            np.testing.assert_array_equal(
                load_image_data(read_image_header(tmp_path / "served" / name, name)),
                load_image_data(read_image_header(tmp_path / "local" / name, name)), err_msg=name)
