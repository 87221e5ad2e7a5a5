"""The statuses the server's commands answer with. StrEnums: each compares equal to, and is sent
as, its string, which is what editors read."""
from __future__ import annotations

from enum import StrEnum


class RewriteStatus(StrEnum):
    """How a rewrite (or a snippet merge) ended, or why it did not start."""

    STARTED = "started"  # running; rewriter.wait gives its end
    DONE = "done"
    UNCHANGED = "unchanged"
    PROPOSED = "proposed"  # review on: its hunks are under review, nothing was applied
    CANCELLED = "cancelled"
    CONFLICT = "conflict"  # the document changed under it
    REFUSED = "refused"  # too large, or the integrity check refused the answer
    BUSY = "busy"  # another rewrite runs in the document
    ERROR = "error"


class ReviewAnswer(StrEnum):
    """How a decision about a proposal (accept, reject, refine) was taken."""

    OK = "ok"
    STALE = "stale"  # the proposal or the document moved on; nothing was applied
    UNKNOWN = "unknown"  # no such proposal or hunk under review
