"""Helpers (no tests): the fields of an OpenAPI document's schemas, as data that two documents can
be compared by: each field's path (`choices[].message.role`), its JSON types, its enum and the
fields it requires. tests/serve/test_openapi.py compares the service's document with OpenAI's.

Run as a script, it writes the fixture that test reads: OpenAI's shapes of the fields the
service documents, from OpenAI's published spec (github.com/openai/openai-openapi, MIT licence):

    python -m tests.helpers.openapi_fields path/to/openapi.json COMMIT > tests/serve/data/openai_fields.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "serve" / "data" / "openai_fields.json"
# OpenAI's objects that the service takes (requests) or gives (the rest), by their names in both documents.
REQUESTS = ("CreateChatCompletionRequest", "CreateCompletionRequest")
RESPONSES = ("CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "CreateCompletionResponse",
             "ErrorResponse", "ListModelsResponse", "Model")


def resolve(schema: dict, root: dict) -> dict:
    while "$ref" in schema:  # its siblings (OpenAI's `nullable`) apply too
        siblings = {key: value for key, value in schema.items() if key != "$ref"}
        schema = {**root["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]], **siblings}
    return schema


def _leaves(schema: dict, root: dict) -> list[dict]:
    """The schemas a value may match: anyOf and oneOf taken apart, allOf joined, references followed."""
    schema = resolve(schema, root)
    parts = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    own = {key: value for key, value in schema.items() if key not in ("anyOf", "oneOf", "allOf")}
    for part in (leaf for joined in schema.get("allOf", ()) for leaf in _leaves(joined, root)):
        own = {**part, **own, "properties": {**part.get("properties", {}), **own.get("properties", {})},
               "required": [*part.get("required", ()), *own.get("required", ())]}
    found = [own] if parts == [] or "type" in own or "properties" in own or "enum" in own else []
    if not found and own.get("nullable"):  # OpenAPI 3.0's null beside a union
        found = [{"type": "null"}]
    for part in parts:
        found += _leaves(part, root)
    return found


def _types(schema: dict) -> set[str] | None:
    """Its JSON types; None when it names none (any value)."""
    kind = schema.get("type")
    if kind is not None:
        types = {kind} if isinstance(kind, str) else set(kind)
    elif "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        types = {json_type(value) for value in values}
    else:
        return None
    return types | {"null"} if schema.get("nullable") else types


def json_type(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
            type(None): "null"}[type(value)]


def shape(schemas: list[dict], root: dict) -> dict:
    """The union of what `schemas` admit: types, enum (None: any value) and required fields (those
    every one of them requires)."""
    leaves = [leaf for schema in schemas for leaf in _leaves(schema, root)]
    types: set[str] | None = set()
    enum: list | None = []
    required: set[str] | None = None
    for leaf in leaves:
        found = _types(leaf)
        types = None if types is None or found is None else types | found
        values = leaf.get("enum", [leaf["const"]] if "const" in leaf else None)
        if values is not None and leaf.get("nullable"):
            values = [*values, None]
        enum = None if enum is None or values is None else enum + [v for v in values if v not in enum]
        if "object" in (found or ()) or "properties" in leaf:
            named = set(leaf.get("required", ()))
            required = named if required is None else required & named
    return {"types": sorted(types) if types is not None else None,
            "enum": sorted(enum, key=json.dumps) if enum is not None else None,
            "required": sorted(required or ())}


def children(schemas: list[dict], segment: str, root: dict) -> list[dict]:
    """The schemas of a field (`name`) or of an array's items (`[]`) under `schemas`."""
    found = []
    for leaf in (leaf for schema in schemas for leaf in _leaves(schema, root)):
        if segment == "[]" and "items" in leaf:
            found.append(leaf["items"])
        elif segment in leaf.get("properties", {}):
            found.append(leaf["properties"][segment])
    return found


def at(component: str, path: str, root: dict) -> list[dict]:
    """The schemas of `path` under a component; "" is the component itself."""
    schemas = [root["components"]["schemas"][component]]
    for segment in path.replace("[]", ".[]").split(".") if path else ():
        schemas = children(schemas, segment, root)
    return schemas


def field_paths(component: str, root: dict) -> list[str]:
    """"" (the component) and every field path under it, through references, arrays and unions."""
    paths: list[str] = [""]

    def walk(schemas: list[dict], prefix: str, depth: int) -> None:
        leaves = [leaf for schema in schemas for leaf in _leaves(schema, root)]
        if depth > 8:
            return
        if any("items" in leaf for leaf in leaves):
            walk(children(schemas, "[]", root), prefix + "[]", depth + 1)
        names = dict.fromkeys(name for leaf in leaves for name in leaf.get("properties", {}))
        for name in names:
            path = f"{prefix}.{name}" if prefix else name
            paths.append(path)
            walk(children(schemas, name, root), path, depth + 1)

    walk([root["components"]["schemas"][component]], "", 0)
    return paths


def shapes(paths_of: dict[str, list[str]], root: dict) -> dict[str, dict[str, dict | None]]:
    """component -> path -> its shape in `root`, None where `root` has no such field."""
    return {component: {path: (shape(found, root) if (found := at(component, path, root)) else None)
                        for path in paths} for component, paths in paths_of.items()}


def main(openai_spec: str, revision: str) -> None:
    from rewriter.serve.openapi import Served, document

    ours = document(Served(["model"]))
    openai = json.loads(Path(openai_spec).read_text())
    fixture = {"source": f"github.com/openai/openai-openapi openapi.json at {revision} (MIT licence, (c) OpenAI), "
                         f"info.version {openai['info']['version']}",
               "components": shapes({name: field_paths(name, ours) for name in REQUESTS + RESPONSES}, openai)}
    sys.stdout.write(dumps(fixture))


def dumps(fixture: dict) -> str:
    """One line a field, for diffs that show which changed."""
    components = ",\n".join(
        f"  {json.dumps(name)}: {{\n" + ",\n".join(f"   {json.dumps(path)}: {json.dumps(found)}"
                                                  for path, found in paths.items()) + "\n  }"
        for name, paths in fixture["components"].items())
    return f'{{\n "source": {json.dumps(fixture["source"])},\n "components": {{\n{components}\n }}\n}}\n'


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
