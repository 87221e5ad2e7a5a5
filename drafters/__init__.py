"""Drafters propose tokens for the model to verify; see base.Drafter for the interface."""
from .base import Draft, Drafter
from .combined import CombinedDrafter, lookup_drafter, rewrite_drafter
from .prediction import PredictionDrafter, PromptSpanDrafter
from .prompt_lookup import PromptLookupDrafter

__all__ = ["Draft", "Drafter", "CombinedDrafter", "PredictionDrafter", "PromptLookupDrafter",
           "PromptSpanDrafter", "lookup_drafter", "rewrite_drafter"]
