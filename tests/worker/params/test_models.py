"""The job parameter models: light to import, one set of limits shared with the engine, and
the same text parsing for every door."""

from __future__ import annotations

import json
import subprocess
import sys
import typing

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from gpu.peaks.limits import MAX_NPEAKS, MAX_STARTS
from worker.job_kinds import job_kinds
from worker.params import (CompressParams, FieldRuleError, JobParams, PeaksParams, TuckerConvParams, error_fields,
                           params_from_text)

_LIGHT = """
import json, sys
import worker.params
from worker.job_kinds import job_kinds
kinds = job_kinds()
print(json.dumps({"kinds": list(kinds), "modules": sorted(sys.modules)}))
"""


def test_schemas_and_registry_import_no_engine():
    out = subprocess.run([sys.executable, "-c", _LIGHT], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert loaded["kinds"] == ["peaks", "compress", "decompress", "cp-conv", "tucker-conv", "fixels", "mask",
                               "response", "fod", "mtnormalise"]
    heavy = [m for m in loaded["modules"] if m.split(".")[0] in ("numba", "llvmlite", "scipy", "nibabel", "torch")]
    assert heavy == []
    assert [m for m in loaded["modules"] if m.split(".")[0] == "gpu"] == [
        "gpu", "gpu.lazy_exports", "gpu.peaks", "gpu.peaks.limits"]


def test_kernel_limits_are_declared_once():
    from gpu.peaks import sshopm_generated_cuda
    from gpu.peaks.search import PeaksOptions

    # the generated kernels size their per-start shared arrays with the same number
    assert sshopm_generated_cuda.MAX_STARTS == MAX_STARTS
    properties = PeaksParams.model_json_schema()["properties"]
    assert (properties["starts"]["maximum"], properties["npeaks"]["maximum"]) == (MAX_STARTS, MAX_NPEAKS)
    with pytest.raises(ValueError, match=f"between 1 and {MAX_STARTS}"):
        PeaksOptions(starts=MAX_STARTS + 1)
    with pytest.raises(ValueError, match=f"between 1 and {MAX_NPEAKS}"):
        PeaksOptions(npeaks=MAX_NPEAKS + 1, starts=MAX_STARTS)


@settings(max_examples=200, deadline=None)
@given(npeaks=st.integers(-2, MAX_NPEAKS + 2), starts=st.integers(-2, MAX_STARTS + 2),
       threshold=st.one_of(st.floats(0, 1e6), st.floats()), relative=st.one_of(st.floats(0, 1), st.floats()))
def test_what_the_model_accepts_the_engine_accepts(npeaks, starts, threshold, relative):
    from gpu.peaks.search import PeaksOptions
    from worker.jobs.peaks import engine_options

    values = {"npeaks": str(npeaks), "starts": str(starts), "threshold": str(threshold),
              "relative_threshold": str(relative)}
    try:
        params = params_from_text(PeaksParams, values)
    except ValidationError:
        return
    assert isinstance(engine_options(params), PeaksOptions)


@pytest.mark.parametrize("kind", ["peaks", "compress", "decompress", "cp-conv", "tucker-conv"])
def test_every_kind_refuses_unknown_names_and_non_finite_numbers(kind):
    model = job_kinds()[kind].params_model
    assert issubclass(model, JobParams)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate({"unknown": "1"})
    floats = [name for name, info in model.model_fields.items() if float in typing.get_args(info.annotation)
              or info.annotation is float]
    assert floats == {"peaks": ["threshold", "relative_threshold"], "compress": ["tol", "abs", "psnr"]}.get(kind, [])
    for name in floats:
        for text in ("inf", "-inf", "nan"):
            with pytest.raises(ValidationError) as refused:
                params_from_text(model, {name: text})
            assert error_fields(refused.value) == [(name, f"Input should be a finite number (got {text})")]


@pytest.mark.parametrize("text", ["8,8,4", "8x8x4", "[8, 8, 4]", " 8 , 8 ,4 "])
def test_list_fields_from_text(text):
    assert params_from_text(CompressParams, {"ranks": text}).ranks == [8, 8, 4]


def test_errors_name_the_field_a_rule_blames():
    with pytest.raises(ValidationError) as refused:
        params_from_text(CompressParams, {"ranks": "3,x,2"})
    assert error_fields(refused.value) == [("ranks.1", "Input should be a valid integer, unable to parse string as "
                                                      "an integer (got x)")]
    with pytest.raises(ValidationError) as refused:
        TuckerConvParams(rank_out=3)
    rule = refused.value.errors()[0]["ctx"]["error"]
    assert isinstance(rule, FieldRuleError) and rule.field == "rank_in"
    assert error_fields(refused.value) == [("rank_in", "give both rank_in (D1) and rank_out (D2) to decompose a "
                                                       "dense kernel")]
    assert PeaksParams(npeaks=MAX_NPEAKS, starts=MAX_STARTS).npeaks == MAX_NPEAKS
