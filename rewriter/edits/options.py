"""What decides an edit session's answer beside the request: one object, which `rewriter apply` and
`rewriter bench --tests` both build from the same command-line flags (cli_arguments.py), so that
the bench measures what `apply` does."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine import DEFAULT_BRANCHES


@dataclass(frozen=True)
class EditOptions:
    # An unchanged answer: how many branches where the model hesitated to try, the first that
    # changes the code and passes every check taking its place (engines that decode locally and
    # greedily offer them).
    branches: int = DEFAULT_BRANCHES
    # Opt-in: the model writes tests of the behaviour asked for, and the candidate answer that
    # passes most of them is taken (self_test.py); they run in a temporary directory.
    self_test: bool = False
    max_new_tokens: int | None = None  # cap on each answer's tokens; None: the engine's budget

    def describe(self) -> str:
        """The options in the words of their flags, for a report."""
        budget = "the default" if self.max_new_tokens is None else str(self.max_new_tokens)
        return (f"--branches {self.branches}, self-test {'on' if self.self_test else 'off'}, "
                f"max new tokens {budget}")
