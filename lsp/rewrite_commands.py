"""The rewrite commands (rewrite lines or a whole document, wait for a rewrite, cancel), registered
on the language server by lsp/server.py: their arguments checked, then handed to the server, which
runs the rewrite. The protocol is in docs/editors.md."""
from __future__ import annotations

from typing import Protocol

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import Workspace

from .arguments import argument, invalid
from .open_documents import is_open
from .statuses import RewriteStatus
from .targets import enclosing_definition, selection_lines

REWRITE = "rewriter.rewrite"
REWRITE_FILE = "rewriter.rewriteFile"
CANCEL = "rewriter.cancel"
WAIT = "rewriter.wait"


class RewriterServer(Protocol):
    """The language server (lsp/server.py) as these commands see it."""

    @property
    def workspace(self) -> Workspace: ...

    def language_of(self, document) -> str: ...

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    async def start_rewrite(self, uri: str, lines: range, instruction: str, wait: bool = False) -> dict: ...

    async def wait_for(self, job_id: int) -> dict: ...

    def cancel_jobs(self, uri: str | None = None, job_id: int | None = None) -> int: ...


def register_rewrite_commands(server: LanguageServer) -> None:
    # The handlers' `ls` goes unannotated: pygls reads handlers' type hints at run time.
    @server.command(REWRITE)
    async def rewrite_command(ls, *args):
        """{uri, range, instruction, wait?}: rewrite the lines the range covers (an empty range: the
        enclosing definition). Answers {status: "started", job} at once, or the outcome with wait: true."""
        return await rewrite_range(ls, args)

    @server.command(REWRITE_FILE)
    async def rewrite_file_command(ls, *args):
        """{uri, instruction, wait?}: rewrite the whole document."""
        uri = argument(args, "uri", str)
        instruction = _instruction(args)
        if not is_open(ls.workspace, uri):
            raise invalid(f"{uri} is not open in the editor")
        lines = ls.workspace.get_text_document(uri).lines
        return await ls.start_rewrite(uri, range(0, max(len(lines), 1)), instruction, _wait(args))

    @server.command(WAIT)
    async def wait_command(ls, *args):
        """{job}: the outcome of a started rewrite, once it ends ({status, message, edits, stats, job})."""
        return await ls.wait_for(argument(args, "job", int))

    @server.command(CANCEL)
    def cancel_command(ls, *args):
        """No argument: cancel every rewrite; {uri}: those in a document; {job}: one."""
        uri = job_id = None
        if args and isinstance(args[0], dict):
            uri = args[0].get("uri")
            job_id = args[0].get("job")
        elif args and isinstance(args[0], str):
            uri = args[0]
        return {"cancelled": ls.cancel_jobs(uri, job_id)}


async def rewrite_range(ls: RewriterServer, args: tuple) -> dict:
    uri = argument(args, "uri", str)
    instruction = _instruction(args)
    rng = argument(args, "range", dict)
    try:
        start, end = rng["start"], rng["end"]
        positions = (int(start["line"]), int(start["character"]), int(end["line"]), int(end["character"]))
    except (KeyError, TypeError, ValueError):
        raise invalid(f"argument 'range' must be an LSP range, got {rng!r:.80}") from None
    if not is_open(ls.workspace, uri):
        raise invalid(f"{uri} is not open in the editor")
    document = ls.workspace.get_text_document(uri)
    line_count = len(document.lines)
    for line, character in (positions[:2], positions[2:]):
        # The end of the document is (line_count, 0); anything past it, or negative, is not clamped.
        if line < 0 or character < 0 or line > line_count or (line == line_count and character > 0):
            raise invalid(f"range {rng} is outside the document, which has {line_count} lines")
    if positions[:2] == positions[2:]:
        taken = enclosing_definition(document.source, ls.language_of(document), positions[0])
        if taken is None:
            message = (f"no function or class around line {positions[0] + 1} to rewrite; "
                       "select the lines to rewrite")
            ls.show(message, types.MessageType.Warning)
            return {"status": RewriteStatus.REFUSED, "message": message, "edits": 0, "stats": {}}
    else:
        taken = selection_lines(*positions, max(line_count, 1))
    return await ls.start_rewrite(uri, taken, instruction, _wait(args))


def _wait(args: tuple) -> bool:
    return bool(argument(args, "wait", bool, required=False))


def _instruction(args: tuple) -> str:
    # Editors that prompt for text may pass it as a second argument instead of in the object.
    if len(args) > 1 and isinstance(args[1], str):
        return args[1]
    return argument(args, "instruction", str)
