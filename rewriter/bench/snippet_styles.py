"""Every reference edit cut as a snippet in every style chat models write, made from the diff alone.

- definitions: each changed function whole, `# ... existing code ...` for the rest (the
  whole_definitions style of snippet_cases.py);
- hunks_0, hunks_2, hunks_5: the unified-diff hunks of before -> after with 0, 2 or 5 lines of
  context, each hunk's new side only (its context and added lines, the removed ones dropped), a
  marker line where the file's code is hidden: between hunks, and before the first and after the
  last when code is hidden there. The lines are the file's as they are (indentation and all): a
  hunk may start mid-expression or mid-block, as a chat model that shows only what changes cuts it;
- hunks_2_bare: the hunks with 2 lines of context, no markers at all, one blank line between hunks;
- hunks_2_dots, hunks_2_slashes, hunks_2_rest: hunks_2 with the marker `...`, `// ...` or
  `# rest unchanged`;
- hunks_2_selected: hunks_2 as a selection that starts at its first line's code, not at the
  line's start: that line without its indentation.

A marker is indented as the first non-blank line it hides; a hidden run of blank lines only is
shown as it is. Hunks come from difflib's SequenceMatcher on the lines (autojunk off, so a long
file's frequent lines, blank ones too, are matched as any other: the smallest diff).
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from ..edits.snippets.lines import indent_of
from .snippet_cases import SnippetCase, definitions_snippet, reference_problem

MARKER = "# ... existing code ..."
DEFINITIONS = "definitions"


@dataclass(frozen=True)
class HunkStyle:
    context: int  # lines of context around each change
    marker: str | None  # the line standing for hidden code; None: no markers, hunks apart by a blank line
    selected: bool = False  # the first code line without its indentation


HUNK_STYLES = {
    "hunks_0": HunkStyle(0, MARKER),
    "hunks_2": HunkStyle(2, MARKER),
    "hunks_5": HunkStyle(5, MARKER),
    "hunks_2_bare": HunkStyle(2, None),
    "hunks_2_dots": HunkStyle(2, "..."),
    "hunks_2_slashes": HunkStyle(2, "// ..."),
    "hunks_2_rest": HunkStyle(2, "# rest unchanged"),
    "hunks_2_selected": HunkStyle(2, MARKER, selected=True),
}
STYLES = (DEFINITIONS, *HUNK_STYLES)


def hunk_spans(before: str, after: str, context: int) -> list[range]:
    """The new side of each unified-diff hunk: the lines of `after` it shows (context and added).
    A hunk that only removes lines, without context, shows none and is left out."""
    old, new = before.splitlines(), after.splitlines()
    groups = SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(context)
    spans = [range(group[0][3], group[-1][4]) for group in groups]
    return [span for span in spans if len(span)]


def hunk_snippet(before: str, after: str, style: HunkStyle) -> str:
    """The hunks' new sides, with a marker for each run of hidden code (or none, in the bare style)."""
    lines = after.splitlines()
    spans = hunk_spans(before, after, style.context)
    if style.marker is None:
        return "\n".join("".join(line + "\n" for line in lines[span.start:span.stop]) for span in spans)
    out: list[str] = []
    shown_to = 0  # the lines before it are shown or stand behind a marker
    for span in [*spans, range(len(lines), len(lines))]:
        hidden = lines[shown_to:span.start]
        code = [line for line in hidden if line.strip()]
        out += [indent_of(code[0]) + style.marker] if code else hidden
        out += lines[span.start:span.stop]
        shown_to = span.stop
    first = next((i for i, line in enumerate(out) if line.strip() and line.strip() != style.marker), None)
    if style.selected and first is not None:
        out[first] = out[first].lstrip(" \t")
    return "".join(line + "\n" for line in out)


def style_snippet(before: str, after: str, style: str) -> str:
    if style == DEFINITIONS:
        return definitions_snippet(before, after, MARKER)
    return hunk_snippet(before, after, HUNK_STYLES[style])


def unknown_styles(names: list[str]) -> list[str]:
    return [name for name in names if name not in STYLES]


def style_cases(rows: list[dict], styles: tuple[str, ...] | list[str] = STYLES) -> list[SnippetCase]:
    """Each reference edit (id, before, after; language and instruction when given) in each style,
    edit by edit. `unsolvable` says where the checks refuse the reference `after` itself."""
    cases = []
    for row in rows:
        before, after = row["before"], row["after"]
        problem = reference_problem(before, after)
        for style in styles:
            cases.append(SnippetCase(str(row["id"]), row.get("language", "python"), before, after,
                                     row.get("instruction", ""), style_snippet(before, after, style), style, problem))
    return cases
