"""Merging a snippet by its definitions: the snippet's definitions are matched to the file's by
kind and name, level by level (a method inside its class); the other lines are matched by their
text, in order. Between two matched items, a marker keeps the file's lines there; with no
marker, the snippet's lines replace them. A new definition lands where the snippet puts it: after
the item before it, or before the item after it. Where that leaves a doubt (a name defined twice,
code between two markers with nothing to place it by, a definition left out with no marker in its
place, a new definition that hides its body behind `...` and shows only an old one's lines, new
lines that may be the file's kept behind a marker, lines indented as a block's that only a marker
would place after the file's end) it raises Unclear.
"""
from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher

from .anchors import line_pairs
from .lines import (
    BLANK,
    DEF,
    EDGE_LINES,
    LINE,
    MARKER,
    Item,
    Node,
    Unclear,
    code_lines,
    indent_of,
    is_bare_ellipsis,
    mostly_same,
    named_in,
    own_lines,
    strip_blank,
    without_self,
)

LIKE = 0.6  # how alike (difflib's ratio) a new line and the file's line it replaces are, at least


def _alike(old: str, new: str) -> bool:
    """Whether `new` reads as `old` changed, not as another line: it holds at least half of old's
    words (`from stat import *` -> `from stat import a, b`), or most of its characters."""
    words = set(re.findall(r"\w+", old))
    return bool(words) and 2 * len(words & set(re.findall(r"\w+", new))) >= len(words) or (
        SequenceMatcher(None, old, new).ratio() >= LIKE)


class DefinitionMerge:
    """One merge: the file's and the snippet's lines and definitions, walked region by region."""

    def __init__(self, file_lines: list[str], file_tree: Node, lines: list[str], tree: Node,
                 markers: set[int], maybe: set[int], removals: str = "", indented: bool = False):
        self.file_lines, self.file_tree = file_lines, file_tree
        self.indented = indented  # every code line of the snippet was indented: lines from inside a block
        self.removals = removals  # the instruction, where it asks for removals: left-out definitions may go
        self.lines, self.tree = lines, tree
        self.snippet_code = {line.strip() for line in lines if line.strip()}
        self.markers, self.maybe = markers, maybe
        self.overrides: dict[int, Node] = {}  # id of a nested file definition -> the snippet's, given alone
        self.moved: dict[int, Node | None] = {}  # id of a file function moved into the snippet's new class ->
        # that class where the class takes its place (the first moved), None where it goes
        self.anchored = 0  # what placed the snippet: definitions and lines matched, an edge marker
        self.by_edge = False  # a marker at the snippet's start or end, placing it before or after the file
        self.shift = ("", "")  # the snippet's indentation here -> the file's

    def root(self) -> list[str]:
        for node in self.tree.children:
            if not any(child.key() == node.key() for child in self.file_tree.children):
                self._match_deeper(node)
                self._find_moved(node)
        edges = [i for i, line in enumerate(self.lines) if line.strip()]
        # placed by a marker at its start or end alone: after (or before) the whole file
        self.by_edge = bool({edges[0], edges[-1]} & (self.markers | self.maybe))
        self.anchored = len(self.overrides) + self.by_edge
        return self._region(self.file_tree, self.tree)

    def _match_deeper(self, node: Node) -> None:
        """A definition given alone (a method without its class) matches the one nested
        definition of its kind and name, unless it calls that one through its class."""
        found = [inner for top in self.file_tree.children for inner in top.walk()
                 if inner is not top and inner.key() == node.key()]
        if len(found) > 1:
            raise Unclear(f"the file has {len(found)} {node.kind}s named {node.name} inside others")
        if found:
            owner = next(outer for top in self.file_tree.children for outer in top.walk()
                         if any(child is found[0] for child in outer.children))
            calls = re.compile(rf"\b{re.escape(owner.name)}\s*\.\s*{re.escape(node.name)}\s*\(")
            if any(calls.search(line) for line in self.lines[node.head + 1:node.hi]):
                # it calls the one it would replace, through that one's class: an override
                # in another class, which the snippet does not name
                self.anchored += 1  # its name matched: the reason is this, not that nothing matches
                raise Unclear(f"the snippet's {node.kind} {node.name}, given alone, calls {owner.name}.{node.name}, "
                              "the file's only one of that name: it belongs to another class, which is unclear")
            self.overrides[id(found[0])] = node

    def _find_moved(self, node: Node) -> None:
        """A new class whose methods are named as the file's functions that the snippet does not
        give at the top, at least one with that function's body (give or take `self.`), has them
        moved into it: it takes the first one's place and the others go. (A method that only
        shares a name calls the function, and a merge that loses a called function fails the
        lint check.)"""
        if node.kind != "class" or any(node.lo <= line < node.hi for line in self.markers | self.maybe):
            return
        given = {child.key() for child in self.tree.children}
        functions = Counter(child.key() for child in self.file_tree.children)
        taken = [(method, function) for method in node.children for function in self.file_tree.children
                 if method.kind == function.kind == "function" and method.name == function.name
                 and functions[function.key()] == 1 and function.key() not in given
                 and id(function) not in self.moved]
        if not any(mostly_same(without_self(code_lines(self.lines, method.head + 1, method.hi)),
                               without_self(code_lines(self.file_lines, function.head + 1, function.hi)))
                   for method, function in taken):
            return
        first = min((function for _, function in taken), key=lambda function: function.lo)
        for _, function in taken:
            self.moved[id(function)] = node if function is first else None

    # ---- one region: a definition (or the whole text) on both sides ---------------------------

    def _region(self, file_node: Node, node: Node) -> list[str]:
        literal = any(is_bare_ellipsis(self.file_lines[i]) for i in own_lines(file_node))
        file_items = self._items(file_node, self.file_lines, set(), False)
        items = self._items(node, self.lines, self.markers | (set() if literal else self.maybe), True)
        pairs = self._pairs(items, file_items)
        self._check_renames(items, file_items, pairs)
        self._check_nested_elsewhere(file_node, items, pairs)
        if file_node is self.file_tree:
            self.anchored += len(pairs)
        out: list[str] = []
        bounds = [(-1, -1), *pairs, (len(items), len(file_items))]
        for (at, file_at), (to, file_to) in zip(bounds, bounds[1:]):
            out += self._gap(items[at + 1:to], file_items[file_at + 1:file_to],
                             edge=file_node is self.file_tree and (at < 0 or to == len(items)),
                             keeps_head=file_node is not self.file_tree and at < 0,
                             anchored=(at >= 0, to < len(items)))
            if to < len(items):
                out += self._pair(items[to], file_items[file_to])
        return out

    def _items(self, node: Node, lines: list[str], markers: set[int], snippet: bool) -> list[Item]:
        items, line = [], node.lo
        given_alone = {id(n) for n in self.overrides.values()} if snippet else set()
        while line < node.hi:
            child = node.child_at(line)
            if child is not None and child is not node:
                if id(child) in given_alone:
                    items.append(Item(MARKER, line))  # merged where its match lies, deeper
                elif id(child) in self.moved and not snippet:
                    into = self.moved[id(child)]
                    if into is not None:  # the class that took it in stands here
                        items.append(Item(DEF, line, child, into.key()))
                else:
                    items.append(Item(DEF, line, child, child.key()))
                line = child.hi
                continue
            text = lines[line].strip()
            if line in markers:
                items.append(Item(MARKER, line))
            elif not text:
                items.append(Item(BLANK, line))
            else:
                items.append(Item(LINE, line, key=("head",) if line == node.head else ("line", text)))
            line += 1
        return items

    def _pairs(self, items: list[Item], file_items: list[Item]) -> list[tuple[int, int]]:
        """Which items match: definitions by kind and name (each defined once on both sides),
        the header line with the header line, then lines by their text in between, in order."""
        counts = Counter(item.key for item in file_items if item.kind == DEF)
        mine = Counter(item.key for item in items if item.kind == DEF)
        fixed = []
        for at, item in enumerate(items):
            if item.kind == DEF and item.key in counts or item.key == ("head",):
                kind, name = item.node.key() if item.node is not None else ("", "")
                if mine[item.key] > 1 or counts[item.key] > 1:
                    # defined more than once: its decorators may still tell which one it is, or
                    # the snippet gives as many as the file has, in the same order
                    match = self._by_decorators(item, items, file_items)
                    if match is None and mine[item.key] == counts[item.key]:
                        nth = sum(other.key == item.key for other in items[:at])
                        match = [i for i, f in enumerate(file_items) if f.key == item.key][nth]
                    if match is not None:
                        fixed.append((at, match))
                        continue
                if mine[item.key] > 1:
                    raise Unclear(f"the snippet defines {kind} {name} {mine[item.key]} times")
                if counts[item.key] > 1:
                    raise Unclear(f"the file defines {kind} {name} {counts[item.key]} times: "
                                   "which one the snippet means is unclear")
                fixed.append((at, next(i for i, f in enumerate(file_items) if f.key == item.key)))
        if any(b[1] < a[1] for a, b in zip(fixed, fixed[1:])):
            raise Unclear("the snippet orders definitions differently from the file")
        pairs = []
        for (at, file_at), (to, file_to) in zip([(-1, -1), *fixed], [*fixed, (len(items), len(file_items))]):
            lines = [i for i in range(at + 1, to) if items[i].kind == LINE]
            theirs = [i for i in range(file_at + 1, file_to) if file_items[i].kind == LINE]
            pairs += line_pairs(items, lines, file_items, theirs, ((at, file_at), (to, file_to)))
            if to < len(items):
                pairs.append((to, file_to))
        return pairs

    def _by_decorators(self, item: Item, items: list[Item], file_items: list[Item]) -> int | None:
        """The one file definition of the item's kind and name with the same decorators, where
        the item has decorators and no other of the snippet's has the same (None otherwise)."""
        def decorators(of: Item, lines: list[str]) -> tuple[str, ...]:
            node = of.node
            return tuple(line.strip() for line in lines[node.lo:node.head]) if node is not None else ()

        mine = decorators(item, self.lines)
        if not mine or sum(other.key == item.key and decorators(other, self.lines) == mine for other in items) > 1:
            return None
        found = [at for at, other in enumerate(file_items)
                 if other.kind == DEF and other.key == item.key and decorators(other, self.file_lines) == mine]
        return found[0] if len(found) == 1 else None

    def _check_renames(self, items: list[Item], file_items: list[Item], pairs: list[tuple[int, int]]) -> None:
        """A new definition whose body is mostly the body of one the snippet does not mention (or
        is its one line) may be that one renamed, or a copy: which, the names cannot say."""
        taken = {file_at for _, file_at in pairs}
        unmatched = [(file_at, item.node) for file_at, item in enumerate(file_items)
                     if item.node is not None and file_at not in taken and id(item.node) not in self.overrides]
        matched = {at for at, _ in pairs}
        bounds = [(-1, -1), *pairs, (len(items), len(file_items))]
        for at, item in enumerate(items):
            if item.node is None or at in matched or not unmatched:
                continue
            # Between the same two matched items on both sides, with no marker there, the new
            # definition replaces the old one in place: that reading is the only one.
            (low, file_low), (high, file_high) = next(
                (before, after) for before, after in zip(bounds, bounds[1:]) if before[0] < at < after[0])
            in_place = not any(items[i].kind == MARKER for i in range(low + 1, high))
            body = code_lines(self.lines, item.node.head + 1, item.node.hi)
            # most of the body alike, or a body of one line that is the other's one line
            similar = [(file_at, node) for file_at, node in unmatched
                       if mostly_same(body, theirs := code_lines(self.file_lines, node.head + 1, node.hi))
                       or len(body) == 1 and body == theirs]
            if in_place and any(file_low < file_at < file_high for file_at, _ in similar):
                continue
            if similar:
                raise Unclear(f"the snippet's new {item.node.kind} {item.node.name} looks like "
                              f"{similar[0][1].name} renamed, or a copy of it")
            hidden = next((node for _, node in unmatched if self._hides_body_of(item.node, node)), None)
            if hidden is not None:
                # in place or not: read as new, its `...` would be its code, and the body it hides lost
                raise Unclear(f"the snippet's new {item.node.kind} {item.node.name} hides its body behind `...` "
                              f"and shows only lines of {hidden.name}'s: that one renamed, its body kept, or a "
                              "new one is unclear")

    def _hides_body_of(self, node: Node, file_node: Node) -> bool:
        """Whether a new definition's body holds a bare `...` where the file's (unmatched) one has
        none, and what else it shows of its body is that one's lines in order, or nothing but a
        header that is that one's but for the name: that definition, renamed, its body hidden."""
        body = range(node.head + 1, node.hi)
        if node.kind != file_node.kind or not any(line in self.maybe for line in body):
            return False
        theirs = [line.strip() for line in self.file_lines[file_node.head + 1:file_node.hi] if line.strip()]
        if any(is_bare_ellipsis(line) for line in theirs):
            return False  # a copy of its `...` may be code
        shown = [self.lines[line].strip() for line in body if self.lines[line].strip() and line not in self.maybe]
        if not shown:
            mine, header = self.lines[node.head].strip(), self.file_lines[file_node.head].strip()
            return mine.partition(node.name)[2] == header.partition(file_node.name)[2]
        rest = iter(theirs)
        return all(line in rest for line in shown)  # in order

    def _check_nested_elsewhere(self, file_node: Node, items: list[Item], pairs: list[tuple[int, int]]) -> None:
        """A new definition inside a function, named as one the file has outside it: a method of a
        class the snippet hides behind a marker, which the snippet's indentation seems to nest in
        the function before it; which one it means, the names cannot say."""
        if file_node.kind != "function":
            return
        matched = {at for at, _ in pairs}
        inside = {id(node) for node in file_node.walk()}
        for at, item in enumerate(items):
            if item.node is None or at in matched:
                continue
            elsewhere = [node for node in self.file_tree.walk()
                         if node is not self.file_tree and node.key() == item.node.key() and id(node) not in inside]
            if elsewhere:
                raise Unclear(f"the snippet's new {item.node.kind} {item.node.name} inside function "
                              f"{file_node.name} is named as one the file has outside it: which it means is unclear")

    def _gap(self, items: list[Item], file_items: list[Item], edge: bool, keeps_head: bool,
             anchored: tuple[bool, bool] = (True, True)) -> list[str]:
        """What stands between two matched items (`anchored`: there is one before, after):
        the snippet's lines, the file's, or both."""
        marks = [at for at, item in enumerate(items) if item.kind == MARKER]
        if not marks:
            code = [item for item in items if item.kind in (LINE, DEF)]
            if (keeps_head or edge) and not code or not items and all(item.kind == BLANK for item in file_items):
                # a definition given without its decorators keeps them; a snippet that starts
                # (or ends) at a matched line leaves the rest of the file as it is, unless the
                # instruction asks to remove a line of that rest; nothing at all between two
                # matched items says nothing of the blank lines there
                if edge and any(item.kind == LINE and named_in(self.file_lines[item.line], self.removals)
                                for item in file_items):
                    raise Unclear(f"the snippet {'ends' if anchored[0] else 'starts'} inside the file with no "
                                   "marker there, and the instruction asks to remove a line "
                                   f"{'after' if anchored[0] else 'before'} it: whether the rest goes is unclear")
                return self._file_lines(file_items)
            dropped = [item.node for item in file_items if item.kind == DEF and item.node is not None]
            if dropped and not code and self.removals and all(
                    re.search(rf"(?<![\w.]){re.escape(node.name)}(?!\w)", self.removals) for node in dropped):
                # the code right before and right after them, and an instruction that asks for
                # removals and names each of them: they are removed (the integrity check still
                # judges which); one it does not name may stand behind a blank line between hunks
                return self._snippet_lines(items)
            if len([item for item in code if item.kind == DEF]) < len(dropped):
                names = ", ".join(f"{node.kind} {node.name}" for node in dropped[:3])
                names += f" and {len(dropped) - 3} more" if len(dropped) > 3 else ""
                raise Unclear(f"the snippet leaves out {names} with no marker in its place")
            lost = sum(1 for item in file_items if item.kind == LINE)
            if edge and lost > max(EDGE_LINES, 2 * len(code)):
                raise Unclear(f"the snippet would replace {lost} lines at the file's start or end, "
                               "with no marker there")
            return self._snippet_lines(items)
        between = [item for item in items[marks[0] + 1:marks[-1]] if item.kind in (LINE, DEF)]
        if between:
            raise Unclear(f"line {between[0].line + 1} of the snippet lies between two markers "
                           "with nothing in the file to place it by")
        head, tail = items[:marks[0]], items[marks[-1] + 1:]
        if edge:
            self._check_beyond_file(head if not anchored[0] else [], at_end=False)
            self._check_beyond_file(tail if not anchored[1] else [], at_end=True)
        low = self._paragraph_end(head, file_items) if anchored[0] else 0
        high = len(file_items) - self._paragraph_end(tail[::-1], file_items[low:][::-1]) if anchored[1] else len(
            file_items)
        kept = file_items[low:high]
        self._check_shown_again(head, kept, at_start=True)
        self._check_shown_again(tail, kept, at_start=False)
        if not kept or kept[0].kind == BLANK:
            head = strip_blank(head, from_end=True)  # the file's blank lines stand between
        if not kept or kept[-1].kind == BLANK:
            tail = strip_blank(tail, from_end=False)
        return self._snippet_lines(head) + self._file_lines(kept) + self._snippet_lines(tail)

    def _check_beyond_file(self, new: list[Item], at_end: bool) -> None:
        """The snippet's lines before its first marker (or after its last: a marker, or a definition
        given alone, merged where its match lies), at the top level, with nothing to place them by
        but that marker and the snippet's edge: before the file's start (or after its end). Lines
        indented as inside a block are some block's, but whose: the file's first (last) one, or one
        the marker hides, its lines shown again? Nothing tells."""
        code = [item for item in new if item.kind in (LINE, DEF)]
        if code and (self.indented or indent_of(self.lines[code[0].line])):
            where = "after the file's end" if at_end else "before the file's start"
            raise Unclear(f"the snippet's line {code[0].line + 1}, indented as inside a block, stands "
                          f"{'after' if at_end else 'before'} all it places (by markers, definitions given alone) "
                          f"with nothing to place it by: {where}, or in a block hidden there, is unclear")

    def _check_cut_off(self, file_node: Node, node: Node) -> None:
        """A definition without markers that ends the snippet on two of the file's lines in a row,
        where the file's goes on after them: the whole new definition (the rest removed), or a hunk
        cut off there (the rest kept)? Nothing tells, however few lines follow (a hunk's context
        cut off two or three lines before a function's end is common, and where the lines merge
        was refused, say for a name those lines use, dropping them would hide the cause)."""
        if any(line.strip() for line in self.lines[node.hi:]):
            return
        mine = [line.strip() for line in self.lines[node.head:node.hi] if line.strip()]
        theirs = [line.strip() for line in self.file_lines[file_node.head:file_node.hi] if line.strip()]
        ends = [at for at in range(1, len(theirs) - 1) if theirs[at - 1:at + 1] == mine[-2:]]
        after = len(theirs) - 1 - ends[-1] if len(mine) >= 2 and ends else 0
        if after:
            raise Unclear(f"the snippet ends inside {node.kind} {node.name} with no marker there, where the file's "
                          f"goes on for {after} line{'s' * (after > 1)}: a hunk cut off there, or those lines "
                          "removed, is unclear")

    def _check_shown_again(self, new: list[Item], kept: list[Item], at_start: bool) -> None:
        """New lines next to a marker that the file holds right behind that marker (inside a
        definition kept there, where lines are not matched one by one): the file's lines shown
        again (moved, re-indented) or a copy of them? Nothing tells."""
        code = [self.lines[item.line].strip() for item in new if item.kind == LINE]
        if not code:
            return
        behind = [self.file_lines[line].strip() for item in kept
                  for line in range(item.line, item.node.hi if item.node is not None else item.line + 1)
                  if self.file_lines[line].strip()]
        # the marker may keep a few lines past those the new ones restate (a comment re-indented
        # above the lines it no longer keeps): as far as EDGE_LINES more
        reach = len(code) + EDGE_LINES
        near = set(behind[:reach] if at_start else behind[-reach:])
        shown = next((text for text in code if text in near), None)
        if shown is not None:
            raise Unclear(f"the snippet's line {shown!r} stands next to a marker that keeps the same line of the "
                          "file: that line shown again, or a copy of it, is unclear")

    def _paragraph_end(self, new: list[Item], file_items: list[Item]) -> int:
        """New lines right after an anchor, then a blank line before the marker: that blank line
        is the file's next one, and the file's lines up to it (no more of them than new lines, no
        definition among them, none held by the snippet elsewhere) are what the new lines replace,
        the file's paragraphs kept: how many file items that takes (0: none, the new lines are
        inserted). Unclear where a line of that paragraph is like none of the new lines: they may
        as well come before it. `new` and `file_items` run away from the anchor."""
        code = strip_blank(new, from_end=True)
        if not code or len(code) == len(new) or any(item.kind != LINE for item in code):
            return 0
        blank = next((at for at, item in enumerate(file_items) if item.kind == BLANK), 0)
        replaced = file_items[:blank]
        if not replaced or len(replaced) > len(code) or any(
                item.kind != LINE or self.file_lines[item.line].strip() in self.snippet_code for item in replaced):
            return 0
        mine = [self.lines[item.line].strip() for item in code]
        if not all(any(_alike(self.file_lines[item.line].strip(), line) for line in mine) for item in replaced):
            # new lines unlike the file's paragraph: inserted before it, or replacing it? Nothing tells
            raise Unclear(f"the snippet's lines from {mine[0]!r} stand before a marker where the file's paragraph "
                          f"from {self.file_lines[replaced[0].line].strip()!r} stands, unlike them: "
                          "whether they replace it or come before it is unclear")
        return blank + 1

    def _pair(self, item: Item, file_item: Item) -> list[str]:
        if item.node is None or file_item.node is None:
            line = self._reindent(self.lines[item.line])
            original = self.file_lines[file_item.line]
            return [original if line.rstrip() == original.rstrip() else line]
        return self._definition(file_item.node, item.node)

    def _definition(self, file_node: Node, node: Node) -> list[str]:
        """A matched definition: merged region by region where the snippet's has markers,
        replaced by it otherwise (decorators the snippet leaves out are kept)."""
        saved = self.shift
        self.shift = (indent_of(self.lines[node.head]), indent_of(self.file_lines[file_node.head]))
        try:
            if self._has_markers(node, file_node):
                return self._region(file_node, node)
            self._check_cut_off(file_node, node)
            keeps = node.lo == node.head and file_node.key() == node.key()  # not a moved function's
            head = self.file_lines[file_node.lo:file_node.head] if keeps else []
            return head + [self._reindent(line) for line in self.lines[node.lo:node.hi]]
        finally:
            self.shift = saved

    def _has_markers(self, node: Node, file_node: Node) -> bool:
        if any(node.lo <= line < node.hi for line in self.markers):
            return True
        for line in (line for line in self.maybe if node.lo <= line < node.hi):
            inner, there = node, file_node
            while inner.innermost(line) is not inner:
                inner = next(child for child in inner.children if child.lo <= line < child.hi)
                same = [child for child in there.children if child.key() == inner.key()]
                if len(same) != 1:
                    break  # a new definition: its `...` is code
                there = same[0]
            else:
                if not any(is_bare_ellipsis(self.file_lines[i]) for i in own_lines(there)):
                    return True
        return False

    # ---- lines out --------------------------------------------------------------------------

    def _snippet_lines(self, items: list[Item]) -> list[str]:
        out = []
        for item in items:
            if item.kind == MARKER:
                continue
            end = item.node.hi if item.node is not None else item.line + 1
            out += [self._reindent(line) for line in self.lines[item.line:end]]
        return out

    def _file_lines(self, items: list[Item]) -> list[str]:
        out = []
        for item in items:
            node = item.node
            if node is not None and id(node) in self.overrides:
                out += self._definition(node, self.overrides[id(node)])
            elif node is not None:
                out += self._overridden_within(node)
            else:
                out.append(self.file_lines[item.line])
        return out

    def _overridden_within(self, node: Node) -> list[str]:
        """A file definition kept as it is, but for a nested one the snippet gave alone."""
        out, line = [], node.lo
        while line < node.hi:
            child = node.child_at(line)
            if child is not None and any(id(inner) in self.overrides for inner in child.walk()):
                out += self._file_lines([Item(DEF, line, child)])
                line = child.hi
            else:
                out.append(self.file_lines[line])
                line += 1
        return out

    def _reindent(self, line: str) -> str:
        if not line.strip():
            return line[len(line.rstrip("\r\n")):] or "\n"
        old, new = self.shift
        return new + (line[len(old):] if line.startswith(old) else line.lstrip(" \t"))
