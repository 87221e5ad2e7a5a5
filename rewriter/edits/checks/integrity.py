"""Edit integrity: an answer is applied only if it keeps the user's code whole.

The syntax guard cannot see an answer that parses but repeats the file around the span, drops a
method or copies another function into the span. Every front end (`rewriter apply`, the language
server, `/v1/rewrites`) runs the span's final text through `FileIntegrity.check` before writing
or applying it:

- echo: leading or trailing lines of the answer that repeat a run of at least two code lines of
  the file outside the span (compared without indentation, blank lines ignored) are stripped;
  an answer that is nothing but such a copy is refused;
- lost definitions and bodies (lost_code.py): a function, method or class that started in the
  span must still be there, with its body, unless the instruction asks for its removal, its
  rename or an abstract one, or it was replaced (replacements.py);
- documentation only (documentation_only.py): where the instruction asks for documentation and
  nothing else ("Add docstrings"), the span's code must stay token for token;
- duplicated code: a definition line or an import that occurred exactly once in the file must not
  occur twice after the rewrite (a definition line again in another scope is an override, as a
  subclass's `setUpClass`: not a copy), nor may other code lines of 20 characters or more at either end
  of the answer or in runs of new lines copied in the file's order: three lines or more, or two
  with a line of the file's own (a string, a call of its definitions). New code often needs a
  common line or two again (a loop header, an accumulator update).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import StrEnum

from ...prompt import common_indent
from ..definitions import Definition, definitions
from ..markers import added_elisions
from ..scopes import SyntaxTree
from .documentation_only import changed_code_line, instruction_asks_documentation_only
from .lint import FileLint
from .lost_code import lost_bodies, lost_definitions
from .replacements import names_used, replaced
from .syntax import FileSyntax


class Status(StrEnum):
    """What becomes of an answer (a Verdict's, and the pipeline's Decision's); a str, so it
    compares with and prints as its value ("applied") wherever a front end shows it."""

    APPLIED = "applied"  # as answered
    STRIPPED = "stripped"  # an echo of the file removed
    REFUSED = "refused"


MIN_ECHO_LINES = 2  # a single repeated line is more likely coincidence than an echo
MIN_COPY_RUN = 3  # repeated ordinary lines inside an answer: a copy from this many on (two if distinctive)
LONG_LINE = 20  # shorter lines (`return x`, `}`, `else:`) repeat in code by nature
IMPORT_LINE = re.compile(r"(import\s|from\s+\S+\s+import\s|#\s*include\b|use\s|using\s|require\b)")
# Comments and docstrings may repeat harmlessly (two functions with the same one-line docstring).
COMMENT_OR_STRING = re.compile(r"""(#(?!\s*include)|//|/\*|\*|--|"|'|`)""")


@dataclass(frozen=True)
class Verdict:
    status: Status
    text: str  # the span's new text: what to write, or (refused) what --force would write
    reason: str = ""  # refused: why ("it would lose method Shape.area"); stripped: what was removed

    @property
    def refused(self) -> bool:
        return self.status == Status.REFUSED


class FileIntegrity:
    """Checks rewrites of spans of one file (parsed and indexed once, for any number of spans)."""

    def __init__(self, text: str, grammar: str | None = None):
        self.text = text
        self.grammar = grammar
        self.tree = SyntaxTree(text, grammar) if grammar else None
        self.syntax = FileSyntax(text, self.tree)
        self.lint = FileLint(text, self.tree) if self.tree is not None and self.tree.language == "python" else None
        self.definitions = definitions(self.tree) if self.tree else []
        self.lines = text.splitlines(keepends=True)
        self.norm = [line.strip() for line in self.lines]
        self.counts = Counter(self.norm)
        self.headers = {d.header for d in self.definitions}
        self._line_starts = [0]
        for line in self.lines:
            self._line_starts.append(self._line_starts[-1] + len(line))
        self._code_lines = [i for i, line in enumerate(self.norm) if line]
        self._where: dict[str, list[int]] = {}  # line text -> its positions in _code_lines
        for position, index in enumerate(self._code_lines):
            self._where.setdefault(self.norm[index], []).append(position)

    def check(self, start: int, end: int, answer: str, instruction: str,
              parsed: SyntaxTree | None = None) -> Verdict:
        """Judge `answer` as the new text of the file's characters [start, end) (`parsed`: the
        whole file with it, where the caller has parsed that already)."""
        original = self.text[start:end]
        if answer == original:
            return Verdict(Status.APPLIED, answer)
        text, echoes = self.strip_echo(start, end, answer)
        stripped = f"removed the answer's copy of {' and '.join(echoes)}" if echoes else ""
        if echoes and not text.strip() and original.strip():
            return Verdict(Status.REFUSED, answer, f"the answer is a copy of {' and '.join(echoes)} "
                                            "instead of a rewrite of the span")
        problems = self.problems(start, end, text, instruction, parsed)
        if problems:
            after = f" (after it {stripped})" if stripped else ""
            return Verdict(Status.REFUSED, text, "; ".join(problems) + after)
        return Verdict(Status.STRIPPED, text, stripped) if echoes else Verdict(Status.APPLIED, text)

    def problems(self, start: int, end: int, text: str, instruction: str,
                 parsed: SyntaxTree | None = None) -> list[str]:
        """What the rewrite of [start, end) into `text` would break, in words; empty when nothing."""
        problems = []
        new_definitions: list[Definition] = []
        if self.tree is not None:
            whole = self.text[:start] + text + self.text[end:]
            candidate = parsed if parsed is not None and parsed.text == whole else SyntaxTree(whole, self.tree.language)
            new_definitions = definitions(candidate, start, start + len(text))
            old_definitions = [d for d in self.definitions if start <= d.start < end]
            # Where the new text does not parse, definitions vanish into error nodes: that is the
            # syntax guard's to judge (and the user's, with --allow-syntax-errors).
            broken = _has_error_within(candidate, start, start + len(text))
            lost = [] if broken else lost_definitions(old_definitions, new_definitions, instruction)
            if lost and replaced(old_definitions, new_definitions, lost, instruction, names_used(candidate)):
                lost = []
            if lost:
                problems.append("it would lose " + _names(lost))
            emptied = [] if broken else lost_bodies(old_definitions, new_definitions, instruction)
            # A class that lost its methods lost its body with them: name the methods only.
            emptied = [d for d in emptied if not any(gone.path[: len(d.path)] == d.path for gone in lost)]
            if emptied:
                problems.append("it would lose the body of " + _names(emptied))
            if not (broken or lost or emptied) and instruction_asks_documentation_only(instruction):
                changed = changed_code_line(self.tree, start, end, candidate, start + len(text))
                if changed is not None:
                    problems.append("the instruction asks for documentation only, and it would change code "
                                    f"(first at {changed!r})")
        elided = added_elisions(self.text[start:end], text)
        if elided:
            problems.append(f"it would write {elided[0]!r} where code was: the answer must write out the code "
                            "it keeps, not a comment for it")
        duplicated = self.duplicated_lines(start, end, text, new_definitions)
        if duplicated:
            shown = ", ".join(repr(line) for line in duplicated[:3])
            more = f" and {len(duplicated) - 3} more" if len(duplicated) > 3 else ""
            problems.append(f"it would duplicate code that occurs once in the file: {shown}{more}")
        return problems

    def duplicated_lines(self, start: int, end: int, text: str,
                         new_definitions: list[Definition] | tuple[()] = ()) -> list[str]:
        """Significant lines that occur once in the file and would occur twice or more after the rewrite."""
        old_span = Counter(line.strip() for line in self.text[start:end].splitlines())
        new_span = Counter(line.strip() for line in text.splitlines())
        # A definition's line again in another scope is an override (a subclass's setUpClass),
        # not a copy: a copy defines the name again where it is defined already.
        scopes = defaultdict(list)
        for definition in [d for d in self.definitions if not start <= d.start < end] + list(new_definitions):
            scopes[definition.header].append(definition.path[:-1])
        overrides = {header for header, where in scopes.items() if 1 < len(where) == len(set(where))}
        redefined = {header for header, where in scopes.items() if len(set(where)) < len(where)}
        headers = self.headers - overrides | redefined
        twice = [line for line, count in new_span.items()
                 if self.counts[line] == 1 and self.counts[line] - old_span[line] + count >= 2
                 and significant(line, headers)]
        # Ordinary lines written again are often new code that needs them (a second loop over
        # the same range, with the same accumulator update). Copies come as runs of new lines in
        # the file's order (see _copied_runs); or at the answer's ends where the
        # neighbours' lines land (so a line from inside the span, written again at an end, is new
        # code like any other: a new function ending in the same `return`); a definition or an
        # import line counts alone.
        code = [line.strip() for line in text.splitlines() if line.strip()]
        copied = {line for line in code[:1] + code[-1:] if not old_span[line]} - overrides
        repeated = set(twice)
        again = {line for line, count in new_span.items() if count > old_span[line] and self.counts[line]}
        kept = [line.strip() for line in self.text[start:end].splitlines() if line.strip()]
        for written in _inserted(kept, code):  # the span's own lines, kept in place, are no copy
            copied.update(self._copied_runs(written, again, repeated))
        return [line for line in twice if line in headers or IMPORT_LINE.match(line) or line in copied]

    def _copied_runs(self, written: list[str], again: set[str], repeated: set[str]) -> set[str]:
        """The significant lines of `written` (new code lines, in order) that come in copied runs:
        lines written again, one after another (short ones such as `else:` included), in the
        file's order, at least MIN_COPY_RUN of them or two holding a line of the file's own."""
        own = {d.path[-1] for d in self.definitions}
        copied: set[str] = set()
        run: list[str] = []
        for line in [*written, ""]:
            ordered = [r for r in run if r in repeated]
            if line in again and not (line in repeated and ordered
                                      and self._where[ordered[-1]][0] > self._where[line][0]):
                run.append(line)
                continue
            if len(ordered) >= 2 and (len(run) >= MIN_COPY_RUN or any(distinctive(r, own) for r in ordered)):
                copied.update(ordered)
            run = [line] if line in again else []
        return copied

    # ---- echo of the surroundings -------------------------------------------------------------

    def strip_echo(self, start: int, end: int, answer: str) -> tuple[str, list[str]]:
        """The answer without leading and trailing copies of the file outside the span, and what
        was removed ("lines 1-20 of the file"); the answer itself when it repeats nothing."""
        first_line = self._line_of(start)
        last_line = self._line_of(max(start, end - 1)) + 1 if end > start else first_line  # exclusive
        lines = answer.splitlines(keepends=True)
        norm = [line.strip() for line in lines]
        code = [i for i, line in enumerate(norm) if line]
        original_code = [line.strip() for line in self.text[start:end].splitlines() if line.strip()]
        if not code or not self.lines:
            return answer, []
        echoes = []
        head = self._run([norm[i] for i in code], original_code, first_line, last_line, forward=True)
        keep_from, keep_to = 0, len(lines)
        shifts = []  # how the echo's indentation differs from the file's (a re-indented echo)
        if head:
            taken, file_from, file_to = head
            keep_from = code[taken - 1] + 1
            shifts.append(_indent_shift(self.lines[file_from], lines[code[0]]))
            echoes.append(f"lines {file_from + 1}-{file_to + 1} of the file")
            code = code[taken:]
        if code:
            tail = self._run([norm[i] for i in code], original_code, first_line, last_line, forward=False)
            if tail:
                taken, file_from, file_to = tail
                keep_to = code[len(code) - taken]
                shifts.append(_indent_shift(self.lines[file_to], lines[code[-1]]))
                echoes.append(f"lines {file_from + 1}-{file_to + 1} of the file")
        if not echoes:
            return answer, []
        kept = [*lines[keep_from:keep_to]]
        if len(set(shifts)) == 1 and shifts[0] is not None:
            kept = _shift(kept, *shifts[0])
        return _like_original(self.text[start:end], "".join(kept)), echoes

    def _run(self, answer_code: list[str], original_code: list[str], first_line: int, last_line: int,
             forward: bool) -> tuple[int, int, int] | None:
        """The longest run of the answer's code lines, from its start (or end), that repeats
        consecutive code lines of the file on one side of the span: (lines, first, last file line)."""
        if not forward:
            answer_code, original_code = answer_code[::-1], original_code[::-1]
        best = None
        for position in self._where.get(answer_code[0], ()):
            index = self._code_lines[position]
            if first_line <= index < last_line:
                continue
            before_span = index < first_line
            length = 0
            while length < len(answer_code):
                at = position + length if forward else position - length
                if not 0 <= at < len(self._code_lines):
                    break
                file_index = self._code_lines[at]
                if (file_index < first_line) != before_span or first_line <= file_index < last_line:
                    break  # the run reached the span: what follows is the span's own text
                if self.norm[file_index] != answer_code[length]:
                    break
                length += 1
            if length >= MIN_ECHO_LINES and (best is None or length > best[0]):
                ends = (index, self._code_lines[position + length - 1 if forward else position - length + 1])
                best = (length, min(ends), max(ends))
        if best is None:
            return None
        # Lines that the span itself also holds, in that order, may be the span's own: no echo.
        run = answer_code[: best[0]]
        if any(original_code[i: i + len(run)] == run for i in range(len(original_code) - len(run) + 1)):
            return None
        return best

    def _line_of(self, offset: int) -> int:
        """0-based line of a character offset."""
        return min(bisect_right(self._line_starts, offset) - 1, max(len(self.lines) - 1, 0))


def _has_error_within(tree: SyntaxTree, start: int, end: int) -> bool:
    """Whether a parse error lies in the characters [start, end) (errors elsewhere do not count)."""
    low, high = tree.byte(start), tree.byte(end)
    stack = [tree.root]
    while stack:
        node = stack.pop()
        if not node.has_error or node.end_byte < low or node.start_byte > high:
            continue
        if node.type == "ERROR" or node.is_missing:
            return True
        stack.extend(node.children)
    return False


def significant(line: str, headers: set[str]) -> bool:
    """Whether a (stripped) line is code whose repetition means copied code, not coincidence."""
    if not line:
        return False
    if line in headers:
        return True
    if COMMENT_OR_STRING.match(line):
        return False
    return bool(IMPORT_LINE.match(line)) or (len(line) >= LONG_LINE and any(c.isalnum() for c in line))


def _inserted(old: list[str], new: list[str]) -> list[list[str]]:
    """The stretches of `new` (lines) that are not `old`'s, kept in order."""
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    return [new[j1:j2] for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("insert", "replace")]


def distinctive(line: str, own_names: set[str]) -> bool:
    """Whether a (stripped) line is this file's own, not common code: it holds a string, or it
    calls one of the file's own definitions (`self.load(path)`; not `len(` or `range(`)."""
    if re.search(r"""["'`]""", line):
        return True
    return any(name in own_names for name in re.findall(r"(\w+)\s*\(", line))


def _names(lost: list[Definition]) -> str:
    # A lost class or function takes what is nested in it along: name the outermost ones.
    paths = {d.path for d in lost}
    outer = [d for d in lost if not any(d.path[:n] in paths for n in range(1, len(d.path)))]
    kinds = {"function": "function", "class": "class"}
    named = [f"{'method' if d.kind == 'function' and len(d.path) > 1 else kinds[d.kind]} {d.name}" for d in outer]
    return ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")


def _like_original(original: str, kept: str) -> str:
    """What remains of an answer after an echo was cut, with the span's own indentation and its
    blank lines at both ends (the echo took or brought some)."""
    want = common_indent(original)
    if want and not common_indent(kept):
        kept = "".join(want + line if line.strip() else line for line in kept.splitlines(keepends=True))
    leading = original[: len(original) - len(original.lstrip("\r\n"))]
    trailing = original[len(original.rstrip("\r\n")):]
    core = kept.strip("\r\n")
    return leading + core + trailing if core else ""


def _indent_shift(file_line: str, answer_line: str) -> tuple[str, str] | None:
    """(removed, added): the answer's line is the file's with `removed` taken off its indentation
    and `added` put in front; None when the two indentations do not nest."""
    have = file_line[: len(file_line) - len(file_line.lstrip(" \t"))]
    got = answer_line[: len(answer_line) - len(answer_line.lstrip(" \t"))]
    if got.endswith(have):
        return "", got[: len(got) - len(have)]
    if have.endswith(got):
        return have[: len(have) - len(got)], ""
    return None


def _shift(lines: list[str], removed: str, added: str) -> list[str]:
    """Undo an indentation shift (`removed` taken off, `added` put on) on each code line."""
    out = []
    for line in lines:
        if line.strip():
            line = line[len(added):] if added and line.startswith(added) else line
            line = removed + line if removed else line
        out.append(line)
    return out
