"""What `rewriter apply` works on: its options, and each file's plan (the spans to rewrite) and what
became of it. Apart from batch.py so that finding files and reporting share them without an import circle."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ..edits.options import EditOptions
from ..edits.target import Target
from ..results import Stats
from .files import SourceFile
from .review import Review


class BatchError(ValueError):
    """The command cannot run as given (a missing path, a bad scope); the message says why."""


class UnitStatus(StrEnum):
    """What became of one span's rewrite."""

    PENDING = "pending"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    FAILED = "failed"  # no answer to apply: an error, the token limit, no code in the answer
    REFUSED = "refused"  # an answer a check of the edit pipeline refused


class FileStatus(StrEnum):
    """What became of one file."""

    PENDING = "pending"
    RUNNING = "running"
    SKIPPED = "skipped"
    UNCHANGED = "unchanged"
    CHANGED = "changed"  # rewritten, not (yet) written
    WRITTEN = "written"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class RunOutcome(StrEnum):
    """How one run of the test command ended."""

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    INTERRUPTED = "interrupted"


class MergePath(StrEnum):
    """--snippet: which merge merged the snippet, or that none did."""

    DETERMINISTIC = "deterministic"
    MODEL = "model"
    REFUSED = "refused"


@dataclass
class Options:
    instruction: str
    lines: tuple[int, int] | None = None  # --lines as the user numbers them (target.numbered_lines)
    expand: bool = False
    each: str | None = None
    write: bool = False
    check: bool = False
    allow_syntax_errors: bool = False
    force: bool = False  # apply answers the integrity or the lint check refuses
    show_refused: bool = False  # print the diff of each refused answer
    # --snippet: the snippet the model merges into the region it goes in (the instruction is then
    # an optional hint); set only once the deterministic merge found it ambiguous
    snippet: str | None = None
    # --test: a shell command that must pass after each file's edit, or the edit is put back
    test: str | None = None
    tries: int = 4  # answers asked for per file under --test, the first included
    test_timeout: float = 300.0  # seconds the test command may run before it counts as failed
    review: Review | None = None  # --interactive: each hunk is asked about; what is accepted is written
    # what decides each answer (--branches, --self-test, --max-new-tokens), as `rewriter bench --tests` takes it
    edit: EditOptions = field(default_factory=EditOptions)

    def __post_init__(self):
        self.write = self.write or self.review is not None


@dataclass
class Unit:
    """One rewrite request: a target in the file and what became of it."""

    target: Target
    status: UnitStatus = UnitStatus.PENDING
    reason: str = ""
    new_text: str | None = None
    refused_text: str | None = None  # a refused answer, kept to show (--show-refused) or apply (--force)
    refused_diff: str = ""  # the file's diff had the refused answer been applied
    stats: Stats | None = None
    part_of: str = ""  # the scope this span was cut from to fit the model's context
    candidates: int = 0  # other answers decoded (branches, samples) after the first came back unchanged or failed
    retried: str = ""  # why the first answer was refused, when a second one was asked for
    failed_before: tuple[str, ...] = ()  # --test: this span's texts of the earlier tries, which the tests failed


@dataclass
class FilePlan:
    """A file and what is planned and done for it: its units, its new text, its status."""

    path: Path  # read and written here (a symlink inside the tree is followed)
    display: str
    status: FileStatus = FileStatus.PENDING
    reason: str = ""
    source: SourceFile | None = None
    language: str = ""
    grammar: str | None = None
    had_errors: bool = False
    units: list[Unit] = field(default_factory=list)
    new_text: str | None = None
    diff: str = ""
    notes: list[str] = field(default_factory=list)  # what planning changed about the scope, for stderr
    seconds: float = 0.0
    merge: MergePath | None = None  # --snippet: which merge merged it
    merge_reason: str = ""  # which merge merged, why the model was asked, or why the snippet was refused
    test_tries: int = 0  # --test: the answers whose edit the tests ran on
    test_outcome: RunOutcome | None = None  # --test: the last run's
    test_tail: str = ""  # --test: the last lines of the last failing run's output
    test_rule: str = ""  # --test: the rule that kept the edit (the tests passed, or pytest's fixed failures)

    def skip(self, reason: str) -> FilePlan:
        self.status, self.reason = FileStatus.SKIPPED, reason
        return self

    @property
    def failed_units(self) -> list[Unit]:
        return [u for u in self.units if u.status in (UnitStatus.FAILED, UnitStatus.REFUSED)]
