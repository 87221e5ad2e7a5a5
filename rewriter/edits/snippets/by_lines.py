"""Merging a snippet by its lines alone, as a diff hunk is applied: each stretch between markers
is placed where its first lines (the context before the change) and its last lines (the context
after it) stand in the file, and the file's lines between those anchors give way to the
snippet's. This reads what the definition merge cannot: fragments that start mid-expression or
mid-block, hunks with or without markers, context with or without the file's indentation, and
lines the snippet indents otherwise than the file (out of a removed `else:`, into a new block):
those are changed lines, paired with the file's by their words. A last stretch without a marker
after it may end inside the file (a chat model leaves out the closing marker); where that reading
is unsure, it is read as written, running to the file's end.

It is sure or it says why not (Unclear): a stretch placed in more than one place, a change with
no anchor on one side, an indentation that does not follow the file's, a stretch that would
replace many more lines than it brings, or lines of which it shows one copy of several. The model merges what it cannot.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from .lines import EDGE_LINES, Unclear, indent_of, named_in

SLACK_LINES = 8  # code lines a replaced stretch of the file may hold beyond the snippet's
# How alike (difflib's ratio) the lines a stretch replaces must be to its own where its context
# fits several places, and twice as alike as at any other place, for the place to be sure.
ALIKE = 0.5
LOOKAHEAD_TRIES = 64  # places tried for stretches whose context fits several, in one merge


@dataclass(frozen=True)
class _Stretch:
    """Snippet lines [start, end) between markers, blank lines at both ends left out."""

    start: int
    end: int
    marker_before: bool
    marker_after: bool


@dataclass(frozen=True)
class _Place:
    """Where a stretch's n code lines go: its first p match the file's code lines [a, a + p), its
    last s match [b, b + s); the file's code lines between give way to the stretch's others. p == 0
    with a == 0 means from the file's start, s == 0 with b past the file's last code line to its end."""

    a: int
    p: int
    b: int
    s: int


def merge_by_lines(file_lines: list[str], lines: list[str], markers: set[int], heads: set[int],
                   removals: str = "") -> list[str]:
    """The file's lines with each of the snippet's stretches merged in (lines end in newlines);
    raises Unclear where the place or the extent of a stretch is uncertain. `heads`: the file's
    lines that start a definition; `removals`: the instruction, where it asks for removals."""
    stretches = _stretches(lines, markers)
    if not stretches:
        raise Unclear("the snippet holds only markers")
    out: list[str] = []
    copied = 0  # file lines [0, copied) are in `out` or replaced
    for low, high, replaced in _LineMerge(file_lines, lines, heads, bool(markers), removals, stretches).edits(0, 0):
        out += file_lines[copied:low] + replaced
        copied = high
    return out + file_lines[copied:]


# The file's lines [low, high) and the lines in their place.
_Edit = tuple[int, int, list[str]]
# A stretch placed: its edit and the file's code line after it, or that line alone where nothing changes.
_Placed = tuple[int, int, list[str], int] | int


def _split(placed: _Placed) -> tuple[list[_Edit], int]:
    """A placed stretch's edit (none where nothing changes) and the cursor after it."""
    if isinstance(placed, int):
        return [], placed
    low, high, replaced, cursor = placed
    return [(low, high, replaced)], cursor


class _Ambiguous(Unclear):
    """A stretch's context fits several places (`places`), none clearly the one."""

    def __init__(self, message: str, places: list[_Place]):
        super().__init__(message)
        self.places = places


class _NotFound(Unclear):
    """A stretch's lines are nowhere in the file after where the stretches before it went."""


class _Misfit(Unclear):
    """A stretch's context lines stand at a place with another indentation each."""


class _LineMerge:
    """The file and the snippet, for merging the snippet's stretches one by one."""

    def __init__(self, file_lines: list[str], lines: list[str], heads: set[int], marked: bool, removals: str,
                 stretches: list[_Stretch]):
        self.file_lines, self.lines, self.heads, self.marked, self.removals = file_lines, lines, heads, marked, removals
        self.stretches = stretches
        self.file_code = [i for i, line in enumerate(file_lines) if line.strip()]
        self.file_keys = [file_lines[i].strip() for i in self.file_code]
        self.tries_left = LOOKAHEAD_TRIES

    def edits(self, start: int, cursor: int) -> list[_Edit]:
        """The file's lines [low, high) that stretches `start` on replace, and their lines in
        place, the first placed at or after the file's code line `cursor`. A stretch whose context
        fits several places goes to the one place after which every later stretch has a place
        too (the snippet shows them in the file's order); where more than one is left, or a later
        stretch is unclear for another reason, the place is unclear. A loop, not a recursion, but
        for those places: a snippet may hold many stretches."""
        out: list[_Edit] = []
        for number in range(start, len(self.stretches)):
            stretch = self.stretches[number]
            code = [i for i in range(stretch.start, stretch.end) if self.lines[i].strip()]
            keys = [self.lines[i].strip() for i in code]
            first = number == 0 and not stretch.marker_before
            last = number == len(self.stretches) - 1 and not stretch.marker_after
            try:
                result = self._placed(stretch, code, keys, cursor, first, last)
            except _Ambiguous as ambiguous:
                return out + self._resolved(ambiguous, number, code, keys, first)
            edit, cursor = _split(result)
            out += edit
        return out

    def _resolved(self, ambiguous: _Ambiguous, number: int, code: list[int], keys: list[str],
                  first: bool) -> list[_Edit]:
        """The edits with stretch `number` at the one of its places where its context lines fit
        and after which the later stretches have places; _NotFound where none is."""
        found = []
        for place in ambiguous.places:
            self.tries_left -= 1
            if self.tries_left < 0:
                raise ambiguous
            try:
                _check_edges(self.file_keys, keys, place)
                edit, cursor = _split(self.stretch(self.stretches[number], code, keys, place, first))
            except _Misfit:
                continue  # its context lines stand there at other indentations than the snippet shows
            except Unclear:
                raise ambiguous from None
            try:
                found.append(edit + self.edits(number + 1, cursor))
            except _NotFound:
                continue  # a later stretch is nowhere after this place
            except Unclear:
                raise ambiguous from None
        if not found:
            raise _NotFound(f"{ambiguous}, and at none of them do its context lines fit and the later lines follow")
        if len(found) > 1:
            raise ambiguous
        return found[0]

    def _placed(self, stretch: _Stretch, code: list[int], keys: list[str], cursor: int, first: bool,
                last: bool) -> _Placed:
        """The stretch merged at its one place (`stretch`'s result)."""
        try:
            place = _place(self.file_keys, keys, cursor, from_start=first, to_end=last)
            return self.stretch(stretch, code, keys, place, first) if place is not None else cursor
        except Unclear as unclear:
            # No marker after the last stretch: read literally, it runs to the file's end. Where
            # the lenient reading (its end matched inside the file) is unsure, the literal one may be sure.
            literal = _to_end(self.file_keys, keys, cursor) if last else None
            if literal is None:
                raise
            try:
                return self.stretch(stretch, code, keys, literal, first)
            except Unclear:
                raise unclear from None

    def stretch(self, stretch: _Stretch, code: list[int], keys: list[str], place: _Place,
                first: bool) -> _Placed:
        """The file's lines [low, high) the stretch (its code lines `code`, stripped `keys`) replaces
        at `place`, the lines in their place and the cursor after them; the cursor alone where
        nothing changes."""
        file_lines, file_code, lines = self.file_lines, self.file_code, self.lines
        place = _reindented_inside(file_lines, file_code, lines, code, place)
        if place.p == len(keys):
            _shift(file_lines, file_code, lines, code, place)  # the same lines, indented otherwise: a change
            return place.a + place.p
        _check_moves(self.file_keys, keys, place)
        if first and self.removals and any(named_in(self.file_keys[i], self.removals) for i in range(place.a)):
            raise Unclear("the snippet starts inside the file with no marker there, and the instruction asks to "
                          "remove a line before it: whether the rest goes is unclear")
        shift = _shift(file_lines, file_code, lines, code, place)
        # without an anchor on a side, the stretch's edge is the file's first (last) line it changes
        low = file_code[place.a + place.p - 1] + 1 if place.p else file_code[place.a] if place.a else 0
        if place.s:
            high = file_code[place.b]
        else:
            high = len(file_lines) if place.b == len(file_code) else file_code[place.b - 1] + 1
        middle_low = code[place.p - 1] + 1 if place.p else stretch.start
        middle_high = code[len(code) - place.s] if place.s else stretch.end
        new = [_shifted(line, shift) for line in lines[middle_low:middle_high]]
        replaced = _aligned(file_lines[low:high], new, {head - low for head in self.heads if low <= head < high},
                            marked=self.marked, removals=self.removals)
        return low, high, replaced, place.b + place.s


def excerpts_file(file_lines: list[str], lines: list[str], markers: set[int]) -> bool:
    """Whether every stretch between markers is the file's lines as they stand, blank lines
    included (runs of them as one), in order, each at the file's indentation give or take one
    shift for the whole stretch: the first at the file's start unless a marker comes before it,
    the last at its end unless one comes after. A stretch that skips a line of the file says that
    line goes, though every line it holds is the file's; one that indents its lines otherwise
    than the file changes them."""
    file_rows = _collapsed([line.rstrip() for line in file_lines])
    while file_rows and not file_rows[-1]:
        file_rows.pop()
    file_keys = [row.strip() for row in file_rows]
    at = 0
    stretches = _stretches(lines, markers)
    for number, stretch in enumerate(stretches):
        end = min([m for m in markers if m >= stretch.end] + [len(lines)])  # trailing blank lines included
        rows = _collapsed([line.rstrip() for line in lines[stretch.start:end]])
        if number == len(stretches) - 1 and not stretch.marker_after:
            while rows and not rows[-1]:
                rows.pop()
        keys = [row.strip() for row in rows]
        if number == len(stretches) - 1 and not stretch.marker_after:
            found = [len(file_keys) - len(keys)] if file_keys[len(file_keys) - len(keys):] == keys else []
        else:
            found = [i for i in range(at, len(file_keys) - len(keys) + 1) if file_keys[i:i + len(keys)] == keys]
        found = [i for i in found if len({len(indent_of(file_rows[i + k])) - len(indent_of(row))
                                          for k, row in enumerate(rows) if row}) <= 1]
        if not found or number == 0 and not stretch.marker_before and found[0] != 0:
            return False
        at = found[0] + len(keys)
    return True


def _collapsed(rows: list[str]) -> list[str]:
    """Runs of blank lines as one; none at the start."""
    out: list[str] = []
    for row in rows:
        if row.strip() or out and out[-1].strip():
            out.append(row if row.strip() else "")
    return out


def _stretches(lines: list[str], markers: set[int]) -> list[_Stretch]:
    stretches, start = [], 0
    for at in [*sorted(markers), len(lines)]:
        code = [i for i in range(start, at) if lines[i].strip()]
        if code:
            stretches.append(_Stretch(code[0], code[-1] + 1, start > 0 and start - 1 in markers, at < len(lines)))
        start = at + 1
    return stretches


def _place(file_keys: list[str], keys: list[str], cursor: int, from_start: bool, to_end: bool) -> _Place | None:
    """The one place for a stretch's code lines `keys` at or after the file's code line `cursor`;
    None for lines the file holds in a row in more than one place (they change nothing)."""
    p, starts = _longest_run(file_keys, keys, cursor)
    if p == len(keys):
        return _Place(starts[0], p, starts[0] + p, 0) if len(starts) == 1 else None
    if not p:
        if not from_start:
            raise _NotFound(f"the snippet's line {keys[0]!r} matches nothing in the file after what comes before it")
        starts = [cursor]
    places = []
    for a in starts:
        s, ends = _longest_run(file_keys[::-1], keys[p:][::-1], 0, stop=len(file_keys) - (a + p))
        if s:
            b = len(file_keys) - max(ends) - s  # the nearest after the prefix
            places.append(_Place(a, p, b, s))
        elif to_end and len(starts) == 1:
            places.append(_Place(a, p, len(file_keys), 0))
    # a prefix found again before the suffix that follows an earlier one is that suffix's own
    places = [place for place in places if not any(place.a < other.a < place.b for other in places)]
    if not places and to_end and len(starts) > 1:
        raise Unclear(f"the snippet's lines from {keys[p - 1]!r} to the file's end fit {len(starts)} places in it")
    if not places:
        raise _NotFound(f"the snippet's line {keys[-1]!r} matches nothing in the file after {keys[p - 1]!r}"
                        if p else f"the snippet's line {keys[-1]!r} matches nothing in the file")
    place = places[0] if len(places) == 1 else _likeliest(places, file_keys, keys)
    if place is None:
        raise _Ambiguous(f"the snippet's lines around {keys[max(p - 1, 0)]!r} fit {len(places)} places in the file",
                         places)
    _check_edges(file_keys, keys, place)
    return place


def _check_edges(file_keys: list[str], keys: list[str], place: _Place) -> None:
    """A stretch without context on a side replaces only a few of the file's lines at its start (end)."""
    new_lines = len(keys) - place.p - place.s
    if not place.p and place.b > max(EDGE_LINES, 2 * new_lines):
        raise Unclear(f"the snippet would replace {place.b} lines at the file's start, with no marker there")
    if not place.s and len(file_keys) - place.a - place.p > max(EDGE_LINES, 2 * new_lines):
        raise Unclear(f"the snippet would replace {len(file_keys) - place.a - place.p} lines at the file's end, "
                      "with no marker there")


def _to_end(file_keys: list[str], keys: list[str], cursor: int) -> _Place | None:
    """The place of a last stretch read as running to the file's end: after its one run of
    context lines, where the file's code after them is few beside the stretch's new lines; None
    where there is no such place."""
    p, starts = _longest_run(file_keys, keys, cursor)
    if not p or p == len(keys) or len(starts) != 1:
        return None
    tail, new_lines = len(file_keys) - starts[0] - p, len(keys) - p
    return None if tail > max(EDGE_LINES, 2 * new_lines) else _Place(starts[0], p, len(file_keys), 0)


def _likeliest(places: list[_Place], file_keys: list[str], keys: list[str]) -> _Place | None:
    """Of the places a stretch's context fits, the one whose lines between the anchors are clearly
    the most like the stretch's own (an edited line keeps most of its words; a hunk shows the
    lines it changes, not others that share its context), else the one where the file holds at
    least twice as many of the stretch's lines as anchors as at any other (the smaller change:
    elsewhere those lines would be copies); None where neither is clear."""
    def likeness(place: _Place) -> float:
        old = "\n".join(file_keys[place.a + place.p:place.b])
        new = "\n".join(keys[place.p:len(keys) - place.s])
        return SequenceMatcher(None, old, new, autojunk=False).ratio() if old and new else 0.0
    scored = sorted(((likeness(place), place) for place in places), key=lambda pair: pair[0], reverse=True)
    (best, place), (runner_up, _) = scored[0], scored[1]
    if best >= ALIKE and runner_up <= best / 2:
        return place
    held = sorted(places, key=lambda place: place.p + place.s, reverse=True)
    return held[0] if held[0].p + held[0].s >= 2 * (held[1].p + held[1].s) else None


def _check_moves(file_keys: list[str], keys: list[str], place: _Place) -> None:
    """A new line that the file holds just outside where the stretch goes may be that line
    moved, or a copy of it: which, the lines cannot say. The context lines around the change
    are not outside: the snippet shows them staying, so a new line like one of them is new."""
    near = len(keys)
    low, high = place.a + place.p, place.b
    around = set(file_keys[max(place.a - near, 0):place.a]) | set(file_keys[high + place.s:high + place.s + near])
    inside = set(file_keys[low:high])
    for key in keys[place.p:len(keys) - place.s]:
        if key in around and key not in inside:
            raise Unclear(f"the snippet's line {key!r} stands next to where it goes in the file: "
                          "moved there, or a copy of it, is unclear")


def _longest_run(file_keys: list[str], keys: list[str], cursor: int, stop: int | None = None) -> tuple[int, list[int]]:
    """The most of `keys`' first lines that the file holds in a row, starting at or after
    `cursor` (and ending by `stop`), and every start where it holds that many."""
    stop = len(file_keys) if stop is None else stop
    best, starts = 0, []
    for at in range(cursor, stop):
        length = 0
        while length < len(keys) and at + length < stop and file_keys[at + length] == keys[length]:
            length += 1
        if length and length > best:
            best, starts = length, [at]
        elif length and length == best:
            starts.append(at)
    return best, starts


def _reindented_inside(file_lines: list[str], file_code: list[int], lines: list[str], code: list[int],
                       place: _Place) -> _Place:
    """The place with its anchors cut back to the lines at one shift: a line next to the change
    that the snippet indents otherwise (out of a removed `else:`, into a new block) is changed, not
    context. Where the outermost anchors differ, the stretch's last line alone at its shift is the
    changed one (a hunk whose context after the change is blank lines ends on a changed line) when
    the context before holds two or more lines at one shift, or when that line is the file's last
    and the context before is not one line at column 0 where the file's is indented; and the file
    must hold it once after that context, else which copy changes is a guess. A first line alone at
    its shift is not taken so: a paste that began mid-line loses that line's indentation. Otherwise
    _shift refuses."""
    def shift(m: int, f: int) -> int:
        return len(indent_of(file_lines[f])) - len(indent_of(lines[m]))
    prefix = [shift(code[k], file_code[place.a + k]) for k in range(place.p)]
    suffix = [shift(code[len(code) - place.s + k], file_code[place.b + k]) for k in range(place.s)]
    if place.p == len(code):  # every line is the file's: the first and the last anchor it
        suffix = prefix
    if not prefix or not suffix or len(set(prefix + suffix)) == 1:
        return place
    if prefix[0] != suffix[-1]:
        before = next((k for k, value in enumerate(prefix) if value != prefix[0]), len(prefix))
        after = next((k for k, value in enumerate(reversed(suffix)) if value != suffix[-1]), len(suffix))
        last = file_lines[file_code[place.b + place.s - 1]].strip()
        at_end = place.b + place.s == len(file_code)
        held_once = [file_lines[i].strip() for i in file_code[place.a + before:]].count(last) == 1
        # a first line at column 0 where the file's is indented may be a paste begun mid-line
        mid_line = before == 1 and prefix[0] > 0 and not indent_of(lines[code[0]])
        if not (after == 1 and (before >= 2 or at_end and not mid_line) and held_once):
            return place
    wanted = prefix[0]
    p = next((k for k, value in enumerate(prefix) if value != wanted), len(prefix))
    s = next((k for k, value in enumerate(reversed(suffix)) if value != wanted), len(suffix))
    end = place.b + place.s if place.s else place.a + place.p
    return _Place(place.a, p, end - s, s)


def _shift(file_lines: list[str], file_code: list[int], lines: list[str], code: list[int],
           place: _Place) -> tuple[str, int]:
    """What to put before the snippet's lines, or how many columns to take from them, to stand
    at the file's indentation: the same for every anchor line, or Unclear."""
    pairs = [(code[k], file_code[place.a + k]) for k in range(place.p)]
    pairs += [(code[len(code) - place.s + k], file_code[place.b + k]) for k in range(place.s)]
    shifts = {len(indent_of(file_lines[f])) - len(indent_of(lines[m])) for m, f in pairs}
    if not pairs and place.a == 0 and place.b == len(file_code):
        return "", 0  # the whole file, no line of it kept: the snippet's lines as they stand
    if len(shifts) != 1:
        raise _Misfit("the snippet's context lines are indented unlike the file's")
    shift = shifts.pop()
    widest = max((file_lines[f] for _, f in pairs), key=lambda line: len(indent_of(line)))
    return (indent_of(widest)[:shift], 0) if shift > 0 else ("", -shift)


def _shifted(line: str, shift: tuple[str, int]) -> str:
    added, taken = shift
    if not line.strip():
        return line
    if indent_of(line)[:taken].strip(" \t") or len(indent_of(line)) < taken:
        raise Unclear("the snippet's lines are indented less than its context lines allow")
    return added + line[taken:]


def _aligned(file_lines: list[str], lines: list[str], heads: set[int], marked: bool, removals: str) -> list[str]:
    """The new lines for a stretch of the file: runs of two or more code lines, and lines each
    side holds once, that both hold in the same order (by their words) stay the file's, at the
    snippet's indentation; between them the snippet's lines replace the file's, except, in a
    snippet without markers, where it has only blank lines against more than a few of the file's
    code lines and no definition (the gap between two hunks; unclear where the instruction asks
    to remove one of them, and where those lines hold a definition, however few). A snippet with
    markers marks what it leaves out. `heads`: the lines that start a definition; `removals`: the
    instruction, where it asks for removals."""
    file_code = [i for i, line in enumerate(file_lines) if line.strip()]
    code = [i for i, line in enumerate(lines) if line.strip()]
    # lines pair by their words, so a block the snippet indents otherwise still shows what it
    # leaves out; a paired line the snippet indents otherwise takes the snippet's indentation
    file_keys, keys = [file_lines[i].strip() for i in file_code], [lines[i].strip() for i in code]
    matcher = SequenceMatcher(None, file_keys, keys, autojunk=False)
    # a line each side holds once is as sure an anchor as a run: it keeps a gap between hunks apart
    once = _held_once(file_keys) & _held_once(keys)
    blocks = [block for block in matcher.get_matching_blocks()
              if block.size >= 2 or not block.size or file_keys[block.a] in once]
    out: list[str] = []
    file_at, at = 0, 0  # lines of each side taken so far
    for block in blocks:
        file_to = file_code[block.a] if block.size else len(file_lines)
        to = code[block.b] if block.size else len(lines)
        out += _replaced(file_lines[file_at:file_to], lines[at:to], any(file_at <= h < file_to for h in heads),
                         marked, removals)
        if block.size:
            file_end, end = file_code[block.a + block.size - 1] + 1, code[block.b + block.size - 1] + 1
            paired = dict(zip(file_code[block.a:block.a + block.size], code[block.b:block.b + block.size]))
            out += [line if i not in paired or line.rstrip() == lines[paired[i]].rstrip() else lines[paired[i]]
                    for i, line in enumerate(file_lines[file_to:file_end], file_to)]
            file_at, at = file_end, end
    return out


def _held_once(keys: list[str]) -> set[str]:
    return {key for key, n in Counter(keys).items() if n == 1}


def _replaced(file_lines: list[str], lines: list[str], defines: bool, marked: bool, removals: str) -> list[str]:
    old = sum(1 for line in file_lines if line.strip())
    new = sum(1 for line in lines if line.strip())
    if not new and lines and old and defines and not marked:
        # however short: a whole definition left out with a blank line in its place is the gap
        # between two hunks as much as a removal
        raise Unclear("the snippet leaves out lines that hold a definition, with no marker in their place")
    if not new and lines and old > EDGE_LINES and not marked:
        if removals and any(named_in(line, removals) for line in file_lines):
            raise Unclear("the snippet has a blank line, and no marker, for lines of the file the instruction asks "
                          "to remove: the gap between two hunks, or those lines removed, is unclear")
        return file_lines  # a blank line between hunks, not a removal
    held = Counter(line.strip() for line in file_lines if any(c.isalnum() for c in line))
    if again := next((line.strip() for line in lines if held[line.strip()] > 1), None):
        # a line shown again where the file holds it twice or more: which of them it stands for,
        # and so which go, is unclear (closing brackets alone are alike everywhere: not counted)
        raise Unclear(f"the snippet's line {again!r} stands for one of {held[again]} such lines of the file "
                      "where it goes: which one is unclear")
    if old > max(2 * new, new + SLACK_LINES):
        raise Unclear(f"the snippet would replace {old} lines of the file with {new}, with no marker there")
    return lines
