"""What every job's parameter model shares, and the one way text becomes parameters.

A job kind's parameters are one pydantic model (:mod:`worker.params.peaks`,
:mod:`worker.params.conv`, :mod:`worker.params.compress`): each field declared once with its
type, limits, default and help; rules between fields are model validators. The REST form
fields, the OpenAPI schema, the CLI options and the worker all use that model, and both
doors (a form, a command line) hand it text through :func:`params_from_text`, so a value
is refused the same way, with the same message, wherever it comes from.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["JobParams", "Backend", "FieldRuleError", "params_from_text", "is_list_field", "error_fields"]

#: Where the numerics run (every job kind but decompress has it, as its last field).
Backend = Annotated[Literal["auto", "cpu", "cuda"], Field(description="auto picks CUDA when a GPU is present")]


class JobParams(BaseModel):
    """Base of the job parameter models: unknown names and non-finite numbers are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class FieldRuleError(ValueError):
    """A rule between fields, raised by a model validator, blamed on one ``field`` so the
    API and the CLI can name it (``npeaks`` rather than the whole model)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def is_list_field(model: type[BaseModel], name: str) -> bool:
    """Whether a parameter is (or may be) a list, which text sends as ``8,8,4``."""
    return _is_list(model.model_fields[name].annotation)


def _is_list(annotation: Any) -> bool:
    if typing.get_origin(annotation) is list:
        return True
    return any(_is_list(arg) for arg in typing.get_args(annotation))


def _split_list(text: str) -> list[str]:
    """``8,8,4``, ``8x8x4`` or ``[8, 8, 4]`` → ``["8", "8", "4"]``; the model converts."""
    text = text.strip().removeprefix("[").removesuffix("]")
    return [item.strip() for item in re.split(r",|(?<=\d)x(?=\d)", text) if item.strip()]


def params_from_text(model: type[BaseModel], values: Mapping[str, str]) -> BaseModel:
    """Validate text values (form fields, command-line options) with ``model``; names not
    given take the model's defaults. Raises :class:`pydantic.ValidationError`."""
    parsed: dict[str, Any] = {}
    for name, text in values.items():
        known = name in model.model_fields
        parsed[name] = _split_list(text) if known and is_list_field(model, name) else text
    return model.model_validate(parsed)


def error_fields(exc: ValidationError) -> list[tuple[str, str]]:
    """``(field, message)`` for each error: the field a :class:`FieldRuleError` blames or
    the error's location (``ranks.1`` for a list item), and pydantic's message without its
    "Value error, " prefix, followed by the value given where it was one (``(got 10)``)."""
    found = []
    for err in exc.errors():
        rule = (err.get("ctx") or {}).get("error")
        if isinstance(rule, FieldRuleError):
            found.append((rule.field, rule.message))
            continue
        field = ".".join(str(part) for part in err["loc"]) or "parameters"
        message = err["msg"].removeprefix("Value error, ")
        given = err.get("input")
        if isinstance(given, (str, int, float)) and not isinstance(given, bool):
            message += f" (got {given})"
        found.append((field, message))
    return found
