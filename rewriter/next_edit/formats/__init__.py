"""The prompt formats of next-edit suggestions (base.NextEditFormat): the published formats of
the open next-edit models, picked by name."""
from __future__ import annotations

from ..base import NextEditFormat
from .sweep import SweepFormat
from .zeta import ZetaFormat

FORMATS: dict[str, NextEditFormat] = {"sweep": SweepFormat(), "zeta": ZetaFormat()}


def format_named(name: str) -> NextEditFormat:
    """The format called `name`; ValueError naming those there are."""
    if name not in FORMATS:
        raise ValueError(f"unknown next-edit format {name!r}: expected one of {', '.join(sorted(FORMATS))}")
    return FORMATS[name]


def format_for_model(model_name: str) -> NextEditFormat | None:
    """The published format a model's name says it was trained on (Sweep's next-edit models,
    Zed's Zeta); None for any other model."""
    lowered = model_name.lower()
    return next((fmt for name, fmt in FORMATS.items() if name in lowered), None)
