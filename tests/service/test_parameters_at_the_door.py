"""Every invalid parameter is refused at the door, the same way through the API (422
problem+json naming the field) and the CLI (exit 2, ``fibertensor: error: --option: ...``),
and never reaches the worker: nothing is queued, nothing is written."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.peaks.limits import MAX_NPEAKS, MAX_STARTS
from service.cli import main
from tests.service.conftest import leftovers
from tests.service.toy_kind import write_volume

# (job kind, form fields, field blamed, words of the message)
REFUSED = [
    ("peaks", {"npeaks": "20", "starts": "10"}, "npeaks", "raise starts to at least 20"),
    ("peaks", {"threshold": "inf"}, "threshold", "finite number"),
    ("peaks", {"threshold": "nan"}, "threshold", "finite number"),
    ("peaks", {"relative_threshold": "-inf"}, "relative_threshold", "finite number"),
    ("peaks", {"starts": str(MAX_STARTS + 1)}, "starts", f"less than or equal to {MAX_STARTS}"),
    ("peaks", {"npeaks": str(MAX_NPEAKS + 1), "starts": str(MAX_STARTS)}, "npeaks",
     f"less than or equal to {MAX_NPEAKS}"),
    ("cp-conv", {"stride": "2"}, "padding", "padding 'same' needs stride 1"),
    ("tucker-conv", {"rank_in": "4"}, "rank_out", "give both rank_in (D1) and rank_out (D2)"),
    ("compress", {"tol": "nan"}, "tol", "finite number"),
    ("compress", {"tol": "inf"}, "tol", "finite number"),
    ("compress", {"abs": "1", "tol": "0.01"}, "abs", "one error target"),
]

# the CLI's spelling of the same requests: (command, inputs, options, option blamed)
CLI = {
    "peaks": (["peaks"], ["{fod}", "{tmp}/out"]),
    "cp-conv": (["conv", "cp"], ["--input", "{npy}", "--kernel", "{kernel}", "--out", "{tmp}/y.npy"]),
    "tucker-conv": (["conv", "tucker"], ["--input", "{npy}", "--kernel", "{kernel}", "--out", "{tmp}/y.npy"]),
    "compress": (["compress"], ["{fod}", "{tmp}/c.npz"]),
}


@pytest.fixture
def inputs(tmp_path):
    """Valid inputs for every kind, so that only the parameters are wrong."""
    fod = write_volume(tmp_path / "fod.nii.gz", np.ones((3, 3, 2, 15), np.float32))
    np.save(tmp_path / "x.npy", np.ones((1, 5, 8, 8), np.float32))
    np.save(tmp_path / "k.npy", np.ones((4, 5, 3, 3), np.float32))
    return {"fod": fod, "npy": tmp_path / "x.npy", "kernel": tmp_path / "k.npy", "tmp": tmp_path}


def _files(kind: str, inputs: dict) -> dict:
    if kind == "peaks":
        return {"fod": ("fod.nii.gz", inputs["fod"].read_bytes())}
    if kind == "compress":
        return {"volume": ("fod.nii.gz", inputs["fod"].read_bytes())}
    return {"input": ("x.npy", inputs["npy"].read_bytes()), "kernel": ("k.npy", inputs["kernel"].read_bytes())}


@pytest.mark.anyio
@pytest.mark.parametrize("kind, fields, field, words", REFUSED)
async def test_api_refuses_with_a_problem_naming_the_field(client, store, inputs, kind, fields, field, words):
    response = await client.post(f"/v1/jobs/{kind}", files=_files(kind, inputs), data=fields)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["title"] == "Invalid parameters"
    assert [e["field"] for e in problem["errors"]] == [field]
    assert words in problem["errors"][0]["message"]
    assert problem["detail"] == f"invalid parameters: {field}: {problem['errors'][0]['message']}"
    assert leftovers(store) == []


@pytest.mark.anyio
async def test_the_same_fields_within_the_limits_are_accepted(client, store, inputs):
    # the edge of every limit above passes: what the door lets in, the engine takes
    accepted = [("peaks", {"npeaks": str(MAX_NPEAKS), "starts": str(MAX_STARTS), "threshold": "0.5"}),
                ("cp-conv", {"stride": "2", "padding": "1", "rank": "2"}),
                ("tucker-conv", {"rank_in": "4", "rank_out": "4"}),
                ("compress", {"tol": "0.01"})]
    for kind, fields in accepted:
        response = await client.post(f"/v1/jobs/{kind}", files=_files(kind, inputs), data=fields)
        assert response.status_code == 202, response.text
        params = response.json()["params"]
        assert {name: str(params[name]) for name in fields} == fields


@pytest.mark.parametrize("kind, fields, field, words", [r for r in REFUSED if r[0] in CLI])
def test_cli_refuses_in_one_line_naming_the_option(capsys, inputs, kind, fields, field, words):
    command, paths = CLI[kind]
    options = [f"--{name.replace('_', '-')}={value}" for name, value in fields.items()]
    argv = [*command, *(p.format(**inputs) for p in paths), *options]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"fibertensor: error: --{field.replace('_', '-')}: ")
    assert words in captured.err and len(captured.err.splitlines()) == 1
    assert sorted(p.name for p in inputs["tmp"].iterdir()) == ["fod.nii.gz", "k.npy", "x.npy"]


def test_submit_refuses_before_uploading(capsys, inputs):
    # nothing listens on port 9: a refusal that named the server would mean the upload was tried
    argv = ["submit", "peaks", str(inputs["fod"]), "--npeaks", "20", "--starts", "10", "--server", "http://127.0.0.1:9"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fibertensor: error: --npeaks: 20 peaks cannot come from 10 starts")
    assert "127.0.0.1" not in err


@pytest.mark.anyio
async def test_openapi_form_fields_are_the_models_fields(client):
    from worker.job_kinds import job_kinds

    spec = (await client.get("/openapi.json")).json()
    for kind in ("peaks", "compress", "decompress", "cp-conv", "tucker-conv"):
        form = spec["paths"][f"/v1/jobs/{kind}"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
        model = job_kinds()[kind].params_model.model_json_schema()["properties"]
        for name, field in model.items():
            if name == "ranks":
                # a list is one comma-separated text field (the same field sent twice is refused)
                assert form["properties"][name]["type"] == "string" and form["properties"][name]["x-list"] == field["anyOf"][0]
                assert "comma-separated values (at least 3 and at most 5)" in form["properties"][name]["description"]
            elif name in ("metrics", "format"):
                assert form["properties"][name]["type"] == "string" and form["properties"][name]["x-list"] == field
            else:
                # FastAPI leaves out a null default in the document it serves
                assert form["properties"][name] == {k: v for k, v in field.items() if (k, v) != ("default", None)}
    peaks = spec["paths"]["/v1/jobs/peaks"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert peaks["properties"]["starts"]["maximum"] == MAX_STARTS and peaks["properties"]["npeaks"]["maximum"] == MAX_NPEAKS
