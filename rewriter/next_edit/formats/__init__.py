"""The next-edit prompt formats, by name: the option that picks one, or the model's name.

Each format is a NextEditFormat (next_edit/base.py): how a request is put to one kind of model and
how its answer is read back. The instruct models we ship take `instruct`.
"""
from __future__ import annotations

from collections.abc import Callable

from ..base import NextEditFormat
from .instruct import InstructFormat

FORMATS: dict[str, Callable[[], NextEditFormat]] = {"instruct": InstructFormat}
# A model whose name holds one of these (lower case) takes that format.
MODEL_FORMATS: tuple[tuple[str, str], ...] = ()
DEFAULT_FORMAT = "instruct"


class UnknownFormat(ValueError):
    """No format has that name; the message names those there are."""


def format_named(name: str) -> NextEditFormat:
    if name not in FORMATS:
        raise UnknownFormat(f"no next-edit format {name!r}; there are {', '.join(sorted(FORMATS))}")
    return FORMATS[name]()


def format_for_model(model: str | None) -> NextEditFormat:
    """The format a model's name calls for: a next-edit model's own, else the instruct format."""
    lowered = (model or "").lower()
    return format_named(next((name for part, name in MODEL_FORMATS if part in lowered), DEFAULT_FORMAT))


def choose_format(option: str, model: str | None) -> NextEditFormat:
    """The format an option names; "auto" picks it by the model's name."""
    return format_for_model(model) if option == "auto" else format_named(option)
