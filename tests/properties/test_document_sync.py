"""Property: the language server's copy of an open document follows the client's through any
sequence of didChange notifications: incremental changes at UTF-16 (or UTF-8, UTF-32) positions
over astral characters, CJK and combining marks; CRLF, CR and LF line ends, mixed; characters
LSP counts as text although Python's splitlines breaks at them (form feed, U+2028, U+0085);
positions past a line's end or past the last line, which LSP says stand for the line's end and
the document's; edits at the very end, empty inserts, whole-document replacements.

The client is modelled here from the LSP specification alone (a Python string, lines ended by
\\r\\n, \\r or \\n); the server is driven through the path it takes for these notifications: pygls's
protocol handlers and the workspace the server holds, directly rather than over stdio.
"""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types

from lsp.server import RewriterServer

URI = "file:///project/sample.py"
LINE_BREAK = re.compile("\r\n|\r|\n")
ENCODINGS = [types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf32]
# Pieces that move positions apart in one encoding and not another, or lines apart in one reading.
PIECES = ["a", "bc", "def f():", " ", "\t", "😀", "𝔘", "中文", "e\u0301", "\n", "\n", "\r\n", "\r\n", "\r",
          "\x0c", "\u2028", "\x85", "\x0b"]
texts = st.one_of(st.lists(st.sampled_from(PIECES), max_size=24).map("".join), st.text(max_size=12))


# ---- the client, by the specification --------------------------------------------------------

def line_starts(text: str) -> list[int]:
    """Where each of the client's lines starts: after every \\r\\n, \\r or \\n (the last line may be empty)."""
    return [0] + [match.end() for match in LINE_BREAK.finditer(text)]


def line_end(text: str, starts: list[int], line: int) -> int:
    """Where the line's text ends, before its line break."""
    if line + 1 >= len(starts):
        return len(text)
    end = starts[line + 1]
    return end - 2 if text[end - 2:end] == "\r\n" else end - 1


def units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf16:
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def position_of(text: str, offset: int, encoding: str) -> types.Position:
    starts = line_starts(text)
    line = max(i for i, start in enumerate(starts) if start <= offset)
    return types.Position(line, units(text[starts[line]:offset], encoding))


def offset_of(text: str, position: types.Position, encoding: str) -> int:
    """A position's offset; a line past the last stands for the document's end, a character past
    the line's end for the line's end."""
    starts = line_starts(text)
    if position.line >= len(starts):
        return len(text)
    offset, end = starts[position.line], line_end(text, starts, position.line)
    while offset < end and units(text[starts[position.line]:offset], encoding) < position.character:
        offset += 1
    return offset


def client_lines(text: str) -> list[str]:
    """The client's lines with their breaks, the empty last one left out (as a document's `lines`)."""
    starts = line_starts(text)
    return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)]) if end > start]


@st.composite
def positions(draw, text: str, encoding: str) -> tuple[int, types.Position]:
    """A place in the client's text (never inside a \\r\\n), as the client may write it."""
    places = [i for i in range(len(text) + 1) if not (text[i - 1:i + 1] == "\r\n" and i > 0)]
    offset = draw(st.sampled_from(places))
    position = position_of(text, offset, encoding)
    starts = line_starts(text)
    at_line_end = offset == line_end(text, starts, position.line)
    if at_line_end and draw(st.booleans()):
        past = draw(st.integers(1, 3))
        if offset == len(text) and draw(st.booleans()):
            position = types.Position(len(starts) - 1 + past, draw(st.integers(0, 3)))  # past the last line
        else:
            position = types.Position(position.line, position.character + past)  # past the line's end
    return offset, position


@st.composite
def changes(draw, text: str, encoding: str):
    """One content change and the text it makes of `text`."""
    new = draw(texts)
    if draw(st.integers(0, 9)) == 0:
        return types.TextDocumentContentChangeWholeDocument(text=new), new
    (start, low), (end, high) = sorted([draw(positions(text, encoding)), draw(positions(text, encoding))],
                                       key=lambda pair: pair[0])
    if offset_of(text, low, encoding) != start or offset_of(text, high, encoding) != end:
        raise AssertionError("the client model disagrees with itself")
    change = types.TextDocumentContentChangePartial(range=types.Range(low, high), text=new)
    return change, text[:start] + new + text[end:]


# ---- the server -------------------------------------------------------------------------------

def run(handler) -> None:
    """Run one of pygls's protocol handlers; what it hands on to the server's own handler is left out."""
    for _ in handler:
        pass


SERVERS: dict[str, RewriterServer] = {}  # encoding -> a server initialized for it


def opened(text: str, encoding: str) -> RewriterServer:
    """A server for a client of `encoding` with `text` open (opened again: the text replaced)."""
    if encoding not in SERVERS:
        server = SERVERS[encoding] = RewriterServer()
        capabilities = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=[encoding]))
        run(server.protocol.lsp_initialize(types.InitializeParams(capabilities=capabilities)))
        assert server.workspace.position_encoding == encoding
    server = SERVERS[encoding]
    run(server.protocol.lsp_text_document__did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=URI, language_id="python", version=1, text=text))))
    return server


def server_text(server: RewriterServer) -> str:
    document = server.workspace.get_text_document(URI)
    assert "".join(document.lines) == document.source
    assert list(document.lines) == client_lines(document.source)  # the server numbers lines as the client does
    return document.source


def changed(server: RewriterServer, version: int, content_changes: list) -> None:
    run(server.protocol.lsp_text_document__did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=content_changes)))


@given(st.data(), texts, st.sampled_from(ENCODINGS))
def test_the_server_text_follows_the_client_through_any_changes(data, text, encoding):
    server = opened(text, encoding)
    assert server_text(server) == text
    for version in range(2, 2 + data.draw(st.integers(1, 6), label="notifications")):
        content_changes = []
        for _ in range(data.draw(st.integers(1, 4), label="changes")):
            change, text = data.draw(changes(text, encoding))
            content_changes.append(change)
        changed(server, version, content_changes)
        assert server_text(server) == text


# Found by the property, kept: (text, range as (line, character) pairs, new text, the client's text after).
FOUND = [
    ("a\x0cb\nc\n", ((1, 0), (1, 1)), "X", "a\x0cb\nX\n"),  # a form feed is no line break
    ("a\u2028b\nc", ((1, 0), (1, 0)), "X", "a\u2028b\nXc"),  # nor is U+2028
    ("ab", ((0, 5), (0, 5)), "X", "abX"),  # past the end of a last line without a break: at its end
    ("ab\r\ncd", ((0, 3), (0, 3)), "X", "abX\r\ncd"),  # past the end of a CRLF line: before its \r\n
    ("x\x85\n", ((1, 0), (1, 0)), "Y", "x\x85\nY"),  # nor is U+0085: the insert goes after the last break
]


@pytest.mark.parametrize("text, lsp_range, new, after", FOUND)
def test_changes_the_property_found_pygls_misplacing(text, lsp_range, new, after):
    (start_line, start_character), (end_line, end_character) = lsp_range
    server = opened(text, types.PositionEncodingKind.Utf16)
    changed(server, 2, [types.TextDocumentContentChangePartial(range=types.Range(
        types.Position(start_line, start_character), types.Position(end_line, end_character)), text=new)])
    assert server_text(server) == after
