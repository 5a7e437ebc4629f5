"""CLI options generated from the parameter models (:mod:`service.cli.model_options`): one
declaration gives the option, its choices, its help, and the same refusals as the API."""

from __future__ import annotations

import argparse
from typing import Annotated, Literal

import pytest
from pydantic import Field

from service.cli import CommandError, build_parser
from service.cli.model_options import add_model_options, option_values, params_from_args
from worker.job_kinds import job_kinds
from worker.params import JobParams


class Example(JobParams):
    size: int = Field(3, ge=1, le=9, description="a size")
    mode: Literal["fast", "exact"] = Field("fast", description="how")
    verbose: bool = Field(False, description="say more")
    sizes: Annotated[list[int], Field(min_length=2)] | None = Field(None, description="several sizes")
    limit: Annotated[float, Field(gt=0)] | None = Field(None, description="an optional limit")


def parse(argv):
    parser = argparse.ArgumentParser(prog="example")
    add_model_options(parser, Example)
    return parser, parser.parse_args(argv)


def test_options_choices_flags_and_help():
    parser, _ = parse([])
    actions = {a.dest: a for a in parser._actions}
    assert actions["size"].option_strings == ["--size"] and actions["size"].help == "a size (at least 1, at most 9; default: 3)"
    assert actions["mode"].choices == ["fast", "exact"] and actions["mode"].help == "how (default: fast)"
    assert actions["verbose"].option_strings == ["--verbose", "--no-verbose"]
    assert actions["sizes"].help == "several sizes (comma-separated; at least 2 values)"  # no example given
    assert actions["limit"].help == "an optional limit (above 0)"
    with pytest.raises(SystemExit):
        parse(["--mode", "slow"])


def test_given_options_only_reach_the_model():
    _, args = parse(["--size", "5", "--no-verbose", "--sizes", "4,6"])
    assert option_values(Example, args) == {"size": "5", "verbose": "false", "sizes": "4,6"}
    params = params_from_args(Example, args)
    assert params.model_dump() == {"size": 5, "mode": "fast", "verbose": False, "sizes": [4, 6], "limit": None}


@pytest.mark.parametrize("argv, message", [
    (["--size", "10"], "--size: Input should be less than or equal to 9 (got 10)"),
    (["--sizes", "4,x"], "--sizes value 2: Input should be a valid integer, unable to parse string as an integer (got x)"),
    (["--limit", "nan"], "--limit: Input should be a finite number (got nan)"),
    (["--size", "0", "--limit", "0"], "--size: Input should be greater than or equal to 1 (got 0); "
                                      "--limit: Input should be greater than 0 (got 0)"),
])
def test_refusals_name_the_option(argv, message):
    _, args = parse(argv)
    with pytest.raises(CommandError) as refused:
        params_from_args(Example, args)
    assert str(refused.value) == message


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _param_help(parser: argparse.ArgumentParser, model) -> dict[str, tuple]:
    options = {f"--{name.replace('_', '-')}" for name in model.model_fields}
    return {a.option_strings[0]: (a.help, a.choices) for a in parser._actions
            if a.option_strings and a.option_strings[0] in options}


@pytest.mark.parametrize("kind, command", [("peaks", ["peaks"]), ("compress", ["compress"]),
                                           ("cp-conv", ["conv", "cp"]), ("tucker-conv", ["conv", "tucker"])])
def test_local_and_submit_commands_share_the_declaration(kind, command):
    model = job_kinds()[kind].params_model
    parser = build_parser()
    local = _param_help(_subparser(parser, *command), model)
    submitted = _param_help(_subparser(parser, "submit", kind), model)
    assert len(local) == len(model.model_fields) and local == submitted
    description = model.model_fields["backend"].description
    assert local["--backend"] == (f"{description} (default: auto)", ["auto", "cpu", "cuda"])


@pytest.mark.parametrize("kind", sorted(job_kinds()))
def test_every_list_option_shows_an_example_of_its_own_that_the_model_takes(kind):
    from service.uploads import upload_form_schema
    from worker.params import is_list_field, params_from_text

    model = job_kinds()[kind].params_model
    form = upload_form_schema(job_kinds()[kind])["requestBody"]["content"]["multipart/form-data"]["schema"]
    parser = argparse.ArgumentParser()
    add_model_options(parser, model)
    helps = {action.dest: action.help for action in parser._actions}
    for name, info in model.model_fields.items():
        if not is_list_field(model, name):
            continue
        assert info.examples, f"{kind} {name}: give the field an example (Field(examples=[[...]]))"
        example = ",".join(map(str, info.examples[0]))
        assert f"(comma-separated, e.g. {example}" in helps[name]
        assert form["properties"][name]["description"].endswith(f", e.g. {example}")
        params_from_text(model, {name: example})  # a value the job takes
    if kind == "peaks":
        assert "(comma-separated, e.g. afd_max,rgb; default: all)" in helps["metrics"]
        assert helps["format"].endswith("(comma-separated, e.g. nifti,fixel)")


def test_version_prints_the_installed_package_version(capsys):
    from importlib import metadata

    from service.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"fibertensor {metadata.version('fibertensor')}\n"


def test_out_prefix_says_where_the_files_go():
    [out_prefix] = [a for a in _subparser(build_parser(), "peaks")._actions if a.dest == "out_prefix"]
    assert out_prefix.help.startswith("folder and start of the output file names: out/sub-01 writes "
                                      "out/sub-01_peaks.nii.gz")
