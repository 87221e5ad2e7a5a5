"""textDocument/codeAction: the rewrites offered where the cursor or the selection is. Each action
is a `rewriter.rewrite` command of the lines it covers (lsp/rewrite_commands.py): one from a
rewrite comment above them, one per preset; the diagnostic preset names the diagnostics there.
Where a proposal under review may be asked again, "Try another candidate" (rewriter.tryAnother)."""
from __future__ import annotations

import logging
from typing import Protocol

from lsprotocol import types
from pygls.workspace import Workspace

from .open_documents import open_document
from .open_reviews import Reviews
from .options import DIAGNOSTIC_PRESET, InitializationOptions
from .proposal_commands import TRY_ANOTHER
from .rewrite_commands import REWRITE
from .targets import comment_instruction, enclosing_definition, lines_after_comment, selection_lines

log = logging.getLogger(__name__)

ACTION_KIND = types.CodeActionKind.RefactorRewrite
TRY_ANOTHER_TITLE = "Try another candidate"


class PrefillAhead(Protocol):
    def touched(self, uri: str, lines: range | None = None) -> None: ...


class RewriterServer(Protocol):
    """The language server (lsp/server.py) as its code actions see it."""

    options: InitializationOptions
    prefill_ahead: PrefillAhead
    reviews: Reviews

    @property
    def workspace(self) -> Workspace: ...

    def language_of(self, document) -> str: ...


def code_actions(ls: RewriterServer, params: types.CodeActionParams,
                 literal: bool) -> list[types.CodeAction | types.Command] | None:
    """The actions for `params`; CodeActions when the client takes them (`literal`), else Commands."""
    only = params.context.only
    if only and not any(ACTION_KIND == kind or ACTION_KIND.startswith(f"{kind}.") for kind in only):
        return None
    return [*review_actions(ls, params, literal), *(rewrite_actions(ls, params, literal) or [])] or None


def review_actions(ls: RewriterServer, params: types.CodeActionParams,
                   literal: bool) -> list[types.CodeAction | types.Command]:
    """Try another candidate, where the range touches the lines of a final proposal that may be asked again."""
    proposal = ls.reviews.by_uri.get(params.text_document.uri)
    if proposal is None or proposal.id in ls.reviews.writing or proposal.why_not_asked_again() is not None:
        return []
    region, rng = proposal.region, params.range
    if rng.end.line < region.start or rng.start.line >= max(region.stop, region.start + 1):
        return []
    command = types.Command(title=TRY_ANOTHER_TITLE, command=TRY_ANOTHER, arguments=[{"proposal": proposal.id}])
    return [types.CodeAction(title=TRY_ANOTHER_TITLE, kind=ACTION_KIND, command=command) if literal else command]


def rewrite_actions(ls: RewriterServer, params: types.CodeActionParams,
                    literal: bool) -> list[types.CodeAction | types.Command] | None:
    """The rewrites offered for `params`."""
    document = open_document(ls.workspace, params.text_document.uri)
    if document is None:  # read from disk otherwise, whatever the path
        return None
    text = document.source
    lines = document.lines
    language = ls.language_of(document)
    rng = params.range
    if rng.start == rng.end:
        taken = (lines_after_comment(text, language, rng.start.line)
                 or enclosing_definition(text, language, rng.start.line))
    else:
        taken = selection_lines(rng.start.line, rng.start.character, rng.end.line, rng.end.character, len(lines))
    if taken is None or not lines:
        return None
    if len(taken) > ls.options.max_rewrite_lines:
        return None
    ls.prefill_ahead.touched(params.text_document.uri, taken)  # what a rewrite from here would send
    actions: list[types.CodeAction | types.Command] = []

    def add(title: str, instruction: str, diagnostics=None):
        command = types.Command(title=title, command=REWRITE, arguments=[{
            "uri": params.text_document.uri,
            "range": {"start": {"line": taken.start, "character": 0},
                      "end": {"line": taken.stop, "character": 0}},
            "instruction": instruction,
        }])
        if literal:
            actions.append(types.CodeAction(title=title, kind=ACTION_KIND, command=command, diagnostics=diagnostics))
        else:
            actions.append(command)

    from_comment = comment_instruction(list(lines), taken)
    if from_comment:
        add(f"Rewrite from comment: {from_comment}", from_comment)
    for preset in ls.options.presets:
        if preset == DIAGNOSTIC_PRESET:
            touching = [d for d in params.context.diagnostics
                        if d.range.start.line < max(taken.stop, taken.start + 1) and d.range.end.line >= taken.start]
            if touching:
                add(f"Rewrite: {preset}", diagnostic_instruction(touching, taken), touching)
            continue
        add(f"Rewrite: {preset}", preset)
    log.debug("%d code actions for %s lines %d-%d", len(actions), params.text_document.uri,
              taken.start, taken.stop)
    return actions


def diagnostic_instruction(diagnostics: list[types.Diagnostic], lines: range) -> str:
    problems = []
    for diagnostic in diagnostics:
        where = diagnostic.range.start.line - lines.start + 1
        source = f" ({diagnostic.source})" if diagnostic.source else ""
        problems.append(f"line {where} of the code: {diagnostic.message}{source}")
    return "Fix these problems reported by the editor, changing nothing else: " + "; ".join(problems)
