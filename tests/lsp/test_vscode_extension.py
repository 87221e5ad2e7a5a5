"""The VS Code extension (lsp/editors/vscode) against the server it starts: its settings are the
server's initializationOptions (same names, defaults and choices) and its own command ids are not
the server's. Its TypeScript is tested with mocha by .ci/run (npm test)."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from lsp import proposal_commands, rewrite_commands
from lsp.options import (
    ENGINE_KINDS,
    NEXT_EDIT_FORMATS,
    STREAM_MODES,
    EngineOptions,
    InitializationOptions,
    _camel,
    parse_options,
)
from rewriter.results import DTYPES

EXTENSION = Path(__file__).resolve().parents[2] / "lsp" / "editors" / "vscode"
MANIFEST = json.loads((EXTENSION / "package.json").read_text())
SETTINGS = MANIFEST["contributes"]["configuration"]["properties"]
# rewriter.server.* say how to start the server and CLIENT_SETTINGS are the extension's own
# (src/settings.ts); every other setting is an initializationOption.
CLIENT_SETTINGS = {"rewriter.nextEdit.enabled"}
# Server options with no setting, and why: the extension's own rewriter.nextEdit.enabled stops it
# asking for suggestions, with no restart; the server's switch is for clients that always ask.
NOT_SETTINGS = {"nextEdits"}
OPTION_SETTINGS = {name.removeprefix("rewriter."): schema for name, schema in SETTINGS.items()
                   if not name.startswith("rewriter.server.") and name not in CLIENT_SETTINGS}
SERVER_COMMANDS = {rewrite_commands.REWRITE, rewrite_commands.REWRITE_FILE, rewrite_commands.CANCEL,
                   rewrite_commands.WAIT, proposal_commands.ACCEPT_HUNK, proposal_commands.REJECT_HUNK,
                   proposal_commands.ACCEPT_ALL, proposal_commands.REJECT_ALL, proposal_commands.REFINE,
                   proposal_commands.TRY_ANOTHER, proposal_commands.APPLY_SNIPPET}
# The extension shows the review, so it asks for it; the server's default (off) is for clients without one.
EXTENSION_DEFAULTS = {"review": True}


def server_defaults() -> dict:
    """The server's options with their defaults, flattened as the settings name them."""
    flat = {}
    for option in dataclasses.fields(InitializationOptions):
        if option.name == "engine":
            for field in dataclasses.fields(EngineOptions):
                flat[f"engine.{_camel(field.name)}"] = getattr(EngineOptions(), field.name)
        else:
            flat[_camel(option.name)] = getattr(InitializationOptions(), option.name)
    return flat


def nested(flat: dict) -> dict:
    """Settings as the extension sends them: nested at the dots, unset (null) ones left out."""
    options: dict = {}
    for key, value in flat.items():
        if value is None:
            continue
        *parents, last = key.split(".")
        node = options
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return options


def test_every_server_option_is_a_setting_and_every_setting_an_option():
    assert set(OPTION_SETTINGS) == set(server_defaults()) - NOT_SETTINGS
    assert all(name.startswith("rewriter.") for name in SETTINGS)
    # The extension keeps its own settings out of the initializationOptions.
    source = (EXTENSION / "src" / "settings.ts").read_text()
    listed = re.search(r"CLIENT_SETTINGS: readonly string\[\] = \[([^\]]*)\]", source).group(1)
    assert {f"rewriter.{name}" for name in re.findall(r"'([A-Za-z.]+)'", listed)} == CLIENT_SETTINGS <= set(SETTINGS)


def test_the_settings_defaults_are_the_servers():
    defaults = server_defaults()
    for key, schema in OPTION_SETTINGS.items():
        assert schema.get("default") == EXTENSION_DEFAULTS.get(key, defaults[key]), key
        if defaults[key] is None:
            assert "null" in schema["type"], f"{key}: unset is null, which its type must admit"
    # Sent as the extension sends them, the defaults are valid and change nothing.
    options, warnings = parse_options(nested({key: schema["default"] for key, schema in OPTION_SETTINGS.items()}))
    assert warnings == [] and options == dataclasses.replace(InitializationOptions(), **EXTENSION_DEFAULTS)


def test_the_settings_choices_are_the_servers():
    assert OPTION_SETTINGS["engine.kind"]["enum"] == list(ENGINE_KINDS)
    assert OPTION_SETTINGS["streamEdits"]["enum"] == list(STREAM_MODES)
    assert OPTION_SETTINGS["engine.dtype"]["enum"] == list(DTYPES)
    assert OPTION_SETTINGS["nextEditFormat"]["enum"] == list(NEXT_EDIT_FORMATS)
    for key, schema in OPTION_SETTINGS.items():
        for choice in schema.get("enum", []):
            # A remote engine needs its URL; with it, every choice is accepted as it is.
            _, warnings = parse_options(nested({key: choice, "engine.url": "http://127.0.0.1:8000/v1"}))
            assert warnings == [], (key, choice, warnings)


def test_the_extensions_commands_are_not_the_servers():
    contributed = {command["command"] for command in MANIFEST["contributes"]["commands"]}
    assert contributed and not contributed & SERVER_COMMANDS
    assert all(command.startswith("rewriter.client.") for command in contributed)
    # The ids the extension calls on the server are the server's own.
    source = (EXTENSION / "src" / "commands.ts").read_text()
    block = source[source.index("SERVER_COMMANDS = {"): source.index("} as const", source.index("SERVER_COMMANDS = {"))]
    assert set(re.findall(r"'(rewriter\.[A-Za-z.]+)'", block)) == SERVER_COMMANDS


def test_the_lockfiles_are_the_manifests():
    for folder in (EXTENSION, EXTENSION / "e2e"):
        manifest = json.loads((folder / "package.json").read_text())
        root = json.loads((folder / "package-lock.json").read_text())["packages"][""]
        for kind in ("dependencies", "devDependencies"):
            assert root.get(kind) == manifest.get(kind), (folder, kind)
