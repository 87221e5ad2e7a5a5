"""Comments that stand for code left out ("# ... existing code ...", "// ...", "rest of the code
unchanged"): a snippet's markers for what stays (snippets/), and, in a model's answer, code the
answer did not write out (checks/integrity.py)."""
from __future__ import annotations

import re
from collections import Counter

# A comment line (any common comment style), the comment's words in group 1.
COMMENT_LINE = re.compile(r"(?:#(?![\[!])|//+|--|/\*+|<!--|;+)\s*(.*?)\s*(?:\*+/|-->)?")
_MARKER_WORDS = re.compile(
    r"\b(existing|unchanged|remains? the same|same as before|rest of (the )?\w+|omitted|"
    r"other (methods|functions|code)|previous code|keep(ing)? (the )?(rest|existing))\b", re.IGNORECASE)
ELLIPSES = ("...", "…")
# Words that say, by themselves, that code was left out (not merely a comment that mentions
# "the existing connection"): what an elision in an answer reads like.
_ELIDED = re.compile(
    r"\b(existing code|rest of (the )?(code|file|module|class|function|method|body|implementation)|"
    r"(code|methods|functions|implementation) (unchanged|omitted|remains? the same)|unchanged code)\b",
    re.IGNORECASE)


def is_marker(line: str) -> bool:
    """A comment that stands for code left out: it starts with an ellipsis or says so in words."""
    comment = COMMENT_LINE.fullmatch(line.strip())
    if comment is None:
        return False
    words = comment.group(1)
    return words.startswith(ELLIPSES) or bool(_MARKER_WORDS.search(words))


def says_more(line: str) -> bool:
    """A marker by its leading ellipsis alone, with words after it ("# ...but then it fails"):
    the file's own comment where the file holds it word for word."""
    comment = COMMENT_LINE.fullmatch(line.strip())
    words = comment.group(1).lstrip("".join(ELLIPSES)).strip(" .…") if comment is not None else ""
    return bool(words) and not _MARKER_WORDS.search(words)


def is_elision(line: str) -> bool:
    """A comment that can only mean code left out: an ellipsis alone or before words that say so
    ("# ...", "// ... existing code ..."), or such words ("# rest of the code unchanged")."""
    comment = COMMENT_LINE.fullmatch(line.strip())
    if comment is None:
        return False
    words = comment.group(1)
    rest = words.lstrip("".join(ELLIPSES) + " ")
    return (words.startswith(ELLIPSES) and (not rest.strip(" .…") or bool(_ELIDED.search(rest)))
            or bool(_ELIDED.search(words)))


def added_elisions(original: str, answer: str) -> list[str]:
    """The answer's elisions that the original does not hold (as many times): code written as a
    comment that stands for it."""
    held = Counter(line.strip() for line in original.splitlines() if is_elision(line))
    added = []
    for line in answer.splitlines():
        if is_elision(line):
            if held[line.strip()]:
                held[line.strip()] -= 1
            else:
                added.append(line.strip())
    return added
