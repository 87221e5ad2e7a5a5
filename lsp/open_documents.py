"""The documents the editor opened: the only ones the server reads or edits.

pygls' `get_text_document` reads a URI it was not given from disk (any path, a device even);
the server never asks it for one. pygls keys the open documents by their URI with percent
escapes undone, so an editor's `file:///a%20b.py` is found under that key here too."""
from __future__ import annotations

from urllib.parse import unquote

from pygls.workspace import TextDocument, Workspace


def is_open(workspace: Workspace, uri: str) -> bool:
    return unquote(uri) in workspace.text_documents


def open_document(workspace: Workspace, uri: str) -> TextDocument | None:
    """The open document at `uri`; None when the editor did not open it."""
    return workspace.get_text_document(uri) if is_open(workspace, uri) else None
