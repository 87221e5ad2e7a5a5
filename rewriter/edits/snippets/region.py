"""Where a snippet that the model merges goes: the file's lines from the first place of the
snippet's first line to the last place of its last line, grown to whole syntax nodes and to the
innermost definition that holds them all. The model then rewrites that region alone, with the
rest of the file as context: it cannot lose or repeat code outside it, and it writes fewer tokens.

A snippet with markers that has none at its start (or end) reaches the file's start (or end), as
the deterministic merges read it: the lines before its first line are the model's to keep or
remove (a hunk that removes the first imports shows only the line after them).

The whole file, where the region cannot be told: a snippet whose first or last line is not in the
file (new code at an end may belong anywhere), a file without a syntax tree, or one that does not
parse (its nodes cannot be trusted to hold whole statements).
"""
from __future__ import annotations

from collections import defaultdict

from ..markers import is_marker
from ..scopes import SyntaxTree, definitions_around, expand_to_nodes
from ..target import Target
from .lines import is_bare_ellipsis


def snippet_region(text: str, snippet: str, grammar: str | None) -> Target:
    """The span of `text` (in `grammar`) the model merges `snippet` into (the whole file where it cannot tell)."""
    whole = Target.whole(text)
    tree = SyntaxTree(text, grammar) if grammar else None
    if tree is None or tree.has_errors():
        return whole
    keys = [line.strip() for line in snippet.splitlines()
            if line.strip() and not is_marker(line) and not is_bare_ellipsis(line)]
    places: defaultdict[str, list[int]] = defaultdict(list)
    for number, line in enumerate(text.splitlines()):
        places[line.strip()].append(number)
    if not keys or not places[keys[0]] or not places[keys[-1]]:
        return whole
    start, stop = min(places[keys[0]]), max(places[keys[-1]]) + 1
    marks = [is_marker(line) or is_bare_ellipsis(line) for line in snippet.splitlines() if line.strip()]
    if any(marks):  # a snippet with markers, but none at an end, reaches that end
        start = start if marks[0] else 0
        stop = stop if marks[-1] else len(text.splitlines())
    if stop <= start:
        return whole
    region = expand_to_nodes(tree, Target.of_lines(text, range(start, stop)))
    holder = next((definition for definition in definitions_around(tree, region.lines.start)
                   if definition.start <= region.start and region.end <= definition.end), None)
    return holder or region
