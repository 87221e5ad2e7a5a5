"""What a rewrite of a span would lose: the functions, methods and classes that started in it, and
the bodies of those that keep their header.

- lost definitions: every function, method and class that started in the span must still be
  there, by its name (moved into or out of a class counts as there), unless the instruction asks
  to remove, delete, drop, merge, combine, inline, eliminate or consolidate (then any may go), or
  to rename ("rename", "change the name to"; then one may go where exactly one new definition of
  the same kind appears in the same place); where they were replaced (replacements.py: no code
  uses the lost names any more, and new definitions stand where they stood), the integrity check
  lets them go too;
- lost bodies: a definition that keeps its header but loses its whole body is lost too (parsers
  built for editors accept `def f():` with nothing under it, Go's `func f()`); a body emptied to
  `{}` or to a docstring alone may go only where the instruction asks to remove, a body as a
  whole only where it asks for something abstract.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict, deque

from ..definitions import EMPTY, FULL, NONE, Definition

# Instructions that ask for definitions to go away (word stems, so "removing", "inlined" count).
REMOVAL_WORDS = re.compile(r"\b(remov|delet|drop|merg|combin|inlin|eliminat|consolidat|get rid)", re.IGNORECASE)
RENAME_WORDS = re.compile(r"\brenam|\bnames?\b.*\bto\b", re.IGNORECASE)
# Instructions under which a definition may keep only its header (`abstract void f();`).
BODYLESS_WORDS = re.compile(r"\b(abstract|prototype)", re.IGNORECASE)


def instruction_allows_removal(instruction: str) -> bool:
    return bool(REMOVAL_WORDS.search(instruction))


def instruction_asks_rename(instruction: str) -> bool:
    return bool(RENAME_WORDS.search(instruction))


def lost_definitions(old: list[Definition], new: list[Definition], instruction: str) -> list[Definition]:
    """The old definitions missing from the new ones that the instruction does not allow to lose."""
    new_paths = Counter(d.path for d in new)
    old_paths = Counter(d.path for d in old)
    # A file may define one name several times (redefinitions, overloads): only as many as went are lost.
    missing = old_paths - new_paths
    lost = []
    for d in old:
        if missing[d.path] > 0:
            missing[d.path] -= 1
            lost.append(d)
    # Moved, not lost: a function made a method ("put these in a class") keeps its name.
    new_names, old_names = Counter(d.path[-1] for d in new), Counter(d.path[-1] for d in old)
    lost = [d for d in lost if new_names[d.path[-1]] < old_names[d.path[-1]]]
    if not lost:
        return []
    if instruction_allows_removal(instruction):
        return unasked_removals(old, lost, instruction)
    if instruction_asks_rename(instruction):
        # A rename: each definition that went is replaced by exactly one new one of its kind, beside it.
        added = Counter((d.kind, d.path[:-1]) for d in new if old_paths[d.path] < new_paths[d.path])
        gone = Counter((d.kind, d.path[:-1]) for d in lost)
        if gone == added:
            return []
    return lost


def unasked_removals(old: list[Definition], lost: list[Definition], instruction: str) -> list[Definition]:
    """Under an instruction that asks for removals: what it names may go (with what that holds,
    where the named one goes too),
    and the rest only while it is at most half of what the span defined (one may always go:
    "delete this function"). An answer that keeps a few lines of a long span and drops every
    function in it ("remove the unused imports" answered with the imports alone) is lost code."""
    words = set(re.findall(r"\w+", instruction))
    # Named: by its own name, or by that of an enclosing definition that goes too ("remove class
    # A" takes A's methods along; "in class A, remove x" does not let A's other methods go).
    gone = {d.path for d in lost}
    unnamed = [d for d in lost if not any(d.path[:n] in gone and d.path[n - 1] in words
                                          for n in range(1, len(d.path) + 1))]
    if len(unnamed) <= max(1, len(old) // 2):
        return []
    return unnamed


def lost_bodies(old: list[Definition], new: list[Definition], instruction: str) -> list[Definition]:
    """The old definitions whose counterpart among the new ones kept its header and lost its body.

    Counterparts are found by name (in order, for a name defined twice), then, for a rename, by
    kind and place among those left over."""
    if BODYLESS_WORDS.search(instruction):
        return []
    by_path: defaultdict[tuple[str, ...], deque[Definition]] = defaultdict(deque)
    for d in new:
        by_path[d.path].append(d)
    pairs, unpaired = [], []
    for d in old:
        if by_path[d.path]:
            pairs.append((d, by_path[d.path].popleft()))
        else:
            unpaired.append(d)
    by_place: defaultdict[tuple[str, tuple[str, ...]], deque[Definition]] = defaultdict(deque)
    for d in sorted((d for left in by_path.values() for d in left), key=lambda d: d.start):
        by_place[(d.kind, d.path[:-1])].append(d)
    for d in unpaired:
        if by_place[(d.kind, d.path[:-1])]:
            pairs.append((d, by_place[(d.kind, d.path[:-1])].popleft()))
    headers_only = [d for d, now in pairs if d.body == FULL and now.body == NONE]
    emptied = [d for d, now in pairs if d.body == FULL and now.body == EMPTY]
    if emptied and instruction_allows_removal(instruction):  # "remove the prints" may leave `{}`
        emptied = unasked_removals(old, emptied, instruction)  # but not every body of the span
    return [d for d in old if d in headers_only or d in emptied]
