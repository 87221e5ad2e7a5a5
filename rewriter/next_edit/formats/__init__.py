"""The prompt formats of next-edit suggestions (base.NextEditFormat), picked by name (an option)
or by the model's name: the published formats of the open next-edit models (Sweep's, Zed's Zeta),
and `instruct` for the instruct models we ship."""
from __future__ import annotations

from ..base import NextEditFormat
from .instruct import InstructFormat
from .sweep import SweepFormat
from .zeta import ZetaFormat

PUBLISHED: dict[str, NextEditFormat] = {"sweep": SweepFormat(), "zeta": ZetaFormat()}  # their name is in the model's
FORMATS: dict[str, NextEditFormat] = {**PUBLISHED, "instruct": InstructFormat()}
DEFAULT_FORMAT = "instruct"  # a model whose name calls for no format of its own


def format_named(name: str) -> NextEditFormat:
    """The format called `name`; ValueError naming those there are."""
    if name not in FORMATS:
        raise ValueError(f"unknown next-edit format {name!r}: expected one of {', '.join(sorted(FORMATS))}")
    return FORMATS[name]


def format_for_model(model_name: str) -> NextEditFormat | None:
    """The published format a model's name says it was trained on (Sweep's next-edit models, Zed's
    Zeta); None for any other model."""
    lowered = model_name.lower()
    return next((fmt for name, fmt in PUBLISHED.items() if name in lowered), None)


def choose_format(option: str, model_name: str | None) -> NextEditFormat:
    """The format an option names; "auto": the one the model's name calls for, else the default."""
    if option != "auto":
        return format_named(option)
    return format_for_model(model_name or "") or FORMATS[DEFAULT_FORMAT]
