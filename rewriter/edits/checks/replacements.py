"""Definitions replaced, not lost: what an answer's new definitions stand in for.

"Replace the X function by ...", "abstract the code into classes", "make it a generator" and
renames in words of their own take definitions away and put others where they stood. The
integrity check (integrity.py) lets such a loss go where nothing still uses the lost names and
the new definitions take their place; anything else lost stays lost.
"""
from __future__ import annotations

import re
from collections import defaultdict

from ..definitions import Definition
from ..node_kinds import COMMENTS
from ..scopes import SyntaxTree

CLASS_WORDS = re.compile(r"\bclass(es)?\b", re.IGNORECASE)
SPECIAL_METHOD = re.compile(r"__\w+__")  # Python's protocols: `__iter__`, `__or__`


def replaced(old: list[Definition], new: list[Definition], lost: list[Definition], instruction: str,
             names_in_use: set[str]) -> bool:
    """Whether the lost definitions were replaced, not lost ("replace the X function by ...",
    "abstract the code into classes", a rename in other words): no code left uses their names,
    and where they stood (between the same surviving definitions) the answer defines new names,
    at least as many (functions for functions), one of them named in the instruction, a special
    method of a class that was there (`__iter__` for "make it a generator") or a class where the
    instruction asks for one."""
    if any(d.path[-1] in names_in_use for d in lost):
        return False
    anchors = {d.path for d in old if d not in lost} & {d.path for d in new}
    lost_paths = {d.path for d in lost}
    outermost = [d for d in lost if not any(d.path[:n] in lost_paths for n in range(1, len(d.path)))]
    old_names = {d.path[-1] for d in old}
    fresh = [d for d in new if d.path not in anchors and d.path[-1] not in old_names]  # moved ones aside
    words = set(re.findall(r"\w+", instruction))
    came = _by_place(new, anchors, fresh)
    for place, went in _by_place(old, anchors, outermost).items():
        instead = came.get(place, [])
        if len(instead) < len(went) or _functions(instead) < _functions(went):
            return False
        if not any(d.path[-1] in words or (SPECIAL_METHOD.fullmatch(d.path[-1]) and d.path[:-1] in anchors)
                   or (d.kind == "class" and CLASS_WORDS.search(instruction)) for d in instead):
            return False
    return True


def _functions(found: list[Definition]) -> int:
    return sum(d.kind == "function" for d in found)


def _by_place(in_order: list[Definition], anchors: set[tuple[str, ...]],
              members: list[Definition]) -> dict[tuple, list[Definition]]:
    """`members` grouped by where they stand: the paths of the anchors before and after them."""
    chosen = {id(d) for d in members}
    places: defaultdict[tuple, list[Definition]] = defaultdict(list)
    waiting: list[Definition] = []
    before: tuple[str, ...] | None = None
    for d in in_order:
        if d.path in anchors:
            if waiting:
                places[(before, d.path)].extend(waiting)
            waiting, before = [], d.path
        elif id(d) in chosen:
            waiting.append(d)
    if waiting:
        places[(before, None)].extend(waiting)
    return places


def names_used(tree: SyntaxTree) -> set[str]:
    """Every identifier in the file's code (a name in a comment or a string is no use of it)."""
    names = set()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            if node.type.endswith("identifier"):
                names.add(tree.data[node.start_byte: node.end_byte].decode("utf-8", "replace"))
        elif node.type not in COMMENTS:
            stack.extend(node.children)
    return names
