"""Command-line options generated from a job's parameter model (:mod:`worker.params`).

Each field becomes one option: ``relative_threshold`` → ``--relative-threshold``, a
``Literal`` → its choices, a ``bool`` → ``--flag/--no-flag``, a list → one comma-separated
value; the help is the field's description with its default and range appended, as
MRtrix3 writes option help. Options default to "not given", so the model's defaults apply,
and the given values reach the model as text through
:func:`worker.params.params_from_text`, exactly as REST form fields do: the CLI, the API and
the worker refuse the same values with the same messages.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from service.cli import CommandError
from worker.params import error_fields, is_list_field, params_from_text

__all__ = ["add_model_options", "option_values", "params_from_options", "params_from_args", "option_name"]

_BOUNDS = ((annotated_types.Ge, "ge", "at least"), (annotated_types.Gt, "gt", "above"),
           (annotated_types.Le, "le", "at most"), (annotated_types.Lt, "lt", "below"))


def option_name(field: str) -> str:
    """``relative_threshold`` → ``--relative-threshold``."""
    return "--" + field.replace("_", "-")


def _union_members(annotation: Any) -> list[Any]:
    """The types a field may take, ``None`` left out: ``[int]`` for ``int | None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [member for member in typing.get_args(annotation) if member is not type(None)]
    return [annotation]


def _constraints(info: FieldInfo) -> list[Any]:
    """A field's annotated-types constraints, also those of an optional ``Annotated`` type
    (``rank: Annotated[int, Field(ge=1)] | None``)."""
    found = list(info.metadata)
    for member in _union_members(info.annotation):
        if typing.get_origin(member) is typing.Annotated:
            for meta in member.__metadata__:
                found.extend(meta.metadata if isinstance(meta, FieldInfo) else [meta])
    return found


def _range_text(constraints: list[Any]) -> str:
    """``at least 1, at most 255`` from annotated-types constraints."""
    words = []
    for constraint in constraints:
        for kind, attr, word in _BOUNDS:
            if isinstance(constraint, kind):
                words.append(f"{word} {getattr(constraint, attr):g}")
        if isinstance(constraint, annotated_types.MinLen) and constraint.min_length:
            words.append(f"at least {_values(constraint.min_length)}")
        if isinstance(constraint, annotated_types.MaxLen):
            words.append(f"at most {_values(constraint.max_length)}")
    return ", ".join(words)


def _values(count: int) -> str:
    return f"{count} value" if count == 1 else f"{count} values"


def _list_note(info: FieldInfo) -> str:
    """``comma-separated, e.g. afd_max,rgb``: the field's first example as it is typed."""
    example = info.examples[0] if info.examples else None
    return "comma-separated" + (f", e.g. {','.join(map(str, example))}" if example else "")


def _help(info: FieldInfo, is_list: bool) -> str:
    notes = [_range_text(_constraints(info))]
    if is_list:
        notes.insert(0, _list_note(info))
    default = None if info.is_required() else info.default
    if isinstance(default, bool):
        notes.append(f"default: {str(default).lower()}")
    elif isinstance(default, (list, tuple)):
        if default:  # as it is typed; an empty default is the description's to explain
            notes.append(f"default: {','.join(map(str, default))}")
    elif default is not None:
        notes.append(f"default: {default}")
    notes = [n for n in notes if n]
    return (info.description or "") + (f" ({'; '.join(notes)})" if notes else "")


def add_model_options(parser: argparse.ArgumentParser, model: type[BaseModel], dest_prefix: str = "",
                      skip: Collection[str] = ()) -> None:
    """One option per field of ``model`` but those in ``skip`` (another model's options give
    them), stored as text in ``dest_prefix + name`` (None when not given);
    :func:`option_values` collects them."""
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        # the one type an optional field takes, without its constraints; None for a real union
        members = [typing.get_args(m)[0] if typing.get_origin(m) is typing.Annotated else m
                   for m in _union_members(info.annotation)]
        annotation = members[0] if len(members) == 1 else None
        kwargs: dict[str, Any] = {"dest": dest_prefix + name, "default": None, "required": info.is_required()}
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(annotation) is Literal:
            kwargs["choices"] = [str(choice) for choice in typing.get_args(annotation)]
        elif is_list_field(model, name):
            kwargs["metavar"] = "V1,V2,..."
        kwargs["help"] = _help(info, is_list_field(model, name))
        parser.add_argument(option_name(name), **kwargs)


def option_values(model: type[BaseModel], args: argparse.Namespace, dest_prefix: str = "") -> dict[str, str]:
    """The options of ``model`` given on the command line, as text by field name."""
    values = {}
    for name in model.model_fields:
        value = getattr(args, dest_prefix + name, None)
        if value is not None:
            values[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return values


def params_from_options(model: type[BaseModel], values: Mapping[str, str]) -> BaseModel:
    """Validate given options with ``model``; a refusal is a :class:`CommandError` naming the
    option (``--npeaks: ...``), so ``fibertensor`` exits 2 with one line."""
    try:
        return params_from_text(model, values)
    except ValidationError as exc:
        problems = []
        for field, message in error_fields(exc):
            name, _, item = field.partition(".")
            where = option_name(name) + (f" value {int(item) + 1}" if item.isdigit() else "")
            problems.append(f"{where}: {message}" if name in model.model_fields else message)
        raise CommandError("; ".join(problems)) from None


def params_from_args(model: type[BaseModel], args: argparse.Namespace, dest_prefix: str = "") -> BaseModel:
    """The validated parameters from a parsed command line (see :func:`params_from_options`)."""
    return params_from_options(model, option_values(model, args, dest_prefix))
