"""Prompt and prediction for one rewrite (reading the model's answer is answer.py's).

The code comes before the instruction so that later requests on the same file share the
longest prompt prefix (and its KV cache). The prediction is the answer we expect if the model
changes nothing: the opening fence, the code, the closing fence.

When a part of a file is rewritten (the rest is context), small models tend to answer with
the wrong part of the file: they start with the code above the span or run on into the code
below it. Two things keep the answer on the span, neither of which changes what greedy
decoding of the prompt gives:
- the assistant's turn is prefilled with the fence and the span's opening up to the name it
  defines (`answer_opening`); the prefill is part of the prompt, so the model's answer is
  plain greedy decoding of that longer prompt;
- `echo_targets` are the lines that follow the span in the file; answer.echo_scan finds where
  an answer, having written the span, goes on copying them; decoding stops there and the copy
  is dropped.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from .engine import Turn

# Measured with `rewriter bench editeval_tests.jsonl --tests` (116 cases, int8 0.5B): a prompt that
# asks for the change "completely and correctly" instead of "keep every part exactly as it is"
# passed 24 instead of 27 and handed back as many originals (32), so this one stays.
SYSTEM_PROMPT = (
    "You are a precise code editor. Apply the user's instruction to the code and reply with "
    "the complete edited code in a single fenced code block, and nothing else. Keep every part "
    "that the instruction does not ask to change exactly as it is."
)

LANGUAGES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "jsx", ".ts": "typescript", ".tsx": "tsx", ".go": "go",
    ".rs": "rust", ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".rb": "ruby", ".php": "php",
    ".swift": "swift", ".kt": "kotlin", ".scala": "scala", ".sh": "bash", ".bash": "bash",
    ".lua": "lua", ".sql": "sql", ".html": "html", ".css": "css", ".json": "json",
    ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".md": "markdown",
}


def language_for(path: str | PurePath) -> str:
    return LANGUAGES.get(PurePath(path).suffix.lower(), "")


@dataclass(frozen=True)
class SourceText:
    """Code as the model sees it (LF line endings), plus how to give it back as the user wrote it."""

    code: str
    newline: str  # "\r\n" when the original used CRLF
    final_newline: bool

    @classmethod
    def from_text(cls, text: str, newline: str | None = None) -> SourceText:
        """`text` as the model sees it; `newline`: the file's, when `text` is a part of it (a
        one-line span shows no line ending of its own)."""
        newline = newline or newline_of(text)
        code = text.replace("\r\n", "\n") if newline == "\r\n" else text
        return cls(code=code, newline=newline, final_newline=text.endswith("\n"))

    def lf(self, text: str) -> str:
        """Text in the original's line endings (a part of the file, an earlier answer) as LF."""
        return text.replace("\r\n", "\n") if self.newline == "\r\n" else text

    def restore(self, code: str) -> str:
        """Give edited code the original's line endings and final-newline convention."""
        code = code.rstrip("\n")
        if self.final_newline and code:
            code += "\n"
        return self.native(code)

    def native(self, text: str) -> str:
        """LF text (the model's, a hunk's) in the original's line endings; text already in them
        stays as it is."""
        return self.lf(text).replace("\n", self.newline) if self.newline != "\n" else text


def newline_of(text: str) -> str:
    """The line ending most of `text`'s lines end with: "\r\n" or "\n"."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"


def common_indent(text: str) -> str:
    """The leading whitespace every non-blank line shares (a method's indentation, say)."""
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in text.splitlines() if line.strip()]
    if not indents:
        return ""
    prefix = indents[0]
    for indent in indents[1:]:
        while not indent.startswith(prefix):
            prefix = prefix[:-1]
    return prefix


def fence_for(code: str) -> str:
    """A backtick fence longer than any backtick run inside the code."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)


@dataclass(frozen=True)
class RewritePrompt:
    messages: list[dict]
    prediction: str  # the answer text if nothing changes (prefill included)
    fence: str
    prefill: str = ""  # the opening of the assistant's turn, written for the model
    # The first lines after each place the code occurs in the context (see echo_targets).
    echo_targets: tuple[tuple[str, ...], ...] = ()
    # Offsets into the first user message (messages[1]): what comes before `code_at` is the same for
    # any part of the same file, what comes before `instruction_at` for any instruction on the same
    # code; a cache of that much can be computed before the request (decoding/rewrite.py's prefill).
    code_at: int | None = None
    instruction_at: int | None = None


def build_prompt(code: str, instruction: str, language: str = "", context: str | None = None,
                 conversation: Sequence[Turn] = ()) -> RewritePrompt:
    """Messages for the chat template and the predicted answer.

    `context` is the rest of the file when only a part (`code`) is rewritten. `conversation`: the
    turns before this one (a refine). The first turn's prompt comes first, as it was sent; each
    turn's answer is the next turn's code, the last one's `code`; then `instruction` follows as the
    next message. A model's cache of the first turn and its answer is then this prompt's prefix.
    """
    if conversation:
        return _next_turn(code, instruction, language, context, conversation)
    fence = fence_for(code + (context or ""))
    block = _block(code, fence, language)
    before_code = f"{fence}{language}\n"
    if context:
        before_code = (f"The surrounding file, for context only:\n{fence}{language}\n{context.rstrip()}\n{fence}\n"
                       f"\nThe code to edit:\n{before_code}")
    message = f"{before_code}{block[len(fence + language) + 1:]}\n"
    code_at, instruction_at = len(before_code), len(message)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{message}\nInstruction: {instruction.strip()}"},
    ]
    if not context:  # a whole file: nothing else to echo, and its first line may be the edit
        return RewritePrompt(messages=messages, prediction=block, fence=fence, code_at=code_at,
                             instruction_at=instruction_at)
    return RewritePrompt(messages=messages, prediction=block, fence=fence,
                         prefill=answer_opening(code, instruction, f"{fence}{language}\n"),
                         echo_targets=echo_targets(code, context), code_at=code_at, instruction_at=instruction_at)


def first_turn(language: str, context: str | None, conversation: Sequence[Turn]) -> RewritePrompt:
    """The prompt the conversation's first turn was sent (`conversation` non-empty)."""
    return build_prompt(conversation[0].code, conversation[0].instruction, language, context)


def _next_turn(code: str, instruction: str, language: str, context: str | None,
               conversation: Sequence[Turn]) -> RewritePrompt:
    first = first_turn(language, context, conversation)
    messages = list(first.messages)
    answers = [turn.code for turn in conversation[1:]] + [code]
    fence = max(first.fence, fence_for("".join(answers)), key=len)  # an answer may hold a longer backtick run
    for number, answer in enumerate(answers):
        if number:
            messages.append({"role": "user", "content": follow_up(conversation[number].instruction)})
        messages.append({"role": "assistant", "content": _block(answer, fence, language)})
    messages.append({"role": "user", "content": follow_up(instruction)})
    block = _block(code, fence, language)
    # messages[1] is the first turn's: so are the places in it.
    if not context:
        return RewritePrompt(messages=messages, prediction=block, fence=fence, code_at=first.code_at,
                             instruction_at=first.instruction_at)
    # The echo to watch for is of the lines after the span in the file: the first turn's code is the span.
    return RewritePrompt(messages=messages, prediction=block, fence=fence,
                         prefill=answer_opening(code, instruction, f"{fence}{language}\n"),
                         echo_targets=first.echo_targets, code_at=first.code_at, instruction_at=first.instruction_at)


def follow_up(instruction: str) -> str:
    """A later turn's message: the next change to the code the model answered with."""
    return ("Apply this instruction to the code of your last answer, and reply with the complete "
            f"edited code in a single fenced code block.\n\nInstruction: {instruction.strip()}")


def _block(code: str, fence: str, language: str) -> str:
    body = code if code.endswith("\n") or not code else code + "\n"
    return f"{fence}{language}\n{body}{fence}"


def merge_instruction(snippet: str, language: str = "", hint: str = "") -> str:
    """The instruction that asks a model to merge a snippet (a chat model's changed code, with
    markers such as `# ... existing code ...` for what stays) into the code it is sent with;
    `hint`, when given, says what the snippet is for. The snippet goes LF, as the code does."""
    snippet = snippet.replace("\r\n", "\n")
    fence = fence_for(snippet)
    body = snippet if snippet.endswith("\n") else snippet + "\n"
    hint_line = f"\nWhat it is for: {hint.strip()}" if hint.strip() else ""
    return ("Merge this update into the code. Where it says that existing code stays (a comment "
            "like `... existing code ...`), keep the code's own lines; everything the update does "
            f"not change stays as it is.{hint_line}\n{fence}{language}\n{body}{fence}")


# An instruction that may change the name a span defines: the name is then not prefilled.
RENAMING = re.compile(r"\bre-?nam|\bnam(e|es|ed|ing)\b", re.IGNORECASE)
# The opening of a definition up to its name: the first identifier directly followed by "("
# (def f(, function f(, int f(, func (r T) f(, @decorator( ...), or a class or struct name.
NAMED_OPENING = re.compile(r"^[^\n]*?[A-Za-z_$][\w$]*(?=\()"
                           r"|^\s*(?:class|struct|interface|enum|trait|impl|type)\s+[A-Za-z_]\w*")
DECORATOR = re.compile(r"^\s*@[\w.]+")


def answer_opening(code: str, instruction: str, fence_line: str) -> str:
    """The assistant turn's prefill: the fence line and the span's first line up to its name.

    Measured on `rewriter bench ... --integrity`: without it the 0.5B model often answered a
    small function with the function above it. The name pins which part of the file is
    meant; the rest of the line (parameters, annotations) stays the model's to write, and
    when the instruction may rename, only the text before the name is prefilled.
    """
    first = code.split("\n", 1)[0]
    if not first.strip():
        return fence_line
    decorator = DECORATOR.match(first)
    if decorator:  # not the name being defined: kept even for a rename
        return fence_line + decorator.group(0)
    opening = NAMED_OPENING.match(first)
    if opening is None:
        return fence_line
    pinned = opening.group(0)
    if RENAMING.search(instruction):
        name = re.search(r"[A-Za-z_$][\w$]*$", pinned)
        # Not the space before the name either: the model writes " name" as one token, and a
        # prefill ending in a space made it write "def  name".
        pinned = pinned[: name.start()].rstrip() if name else ""
    return fence_line + pinned if pinned.strip() else fence_line


# How many non-blank lines of what follows the span an answer must copy to count as an echo:
# one such line may be the edit's own (a `return x` the next line also has), two in a row
# starting right after the span are the file going on.
ECHO_LINES = 2
_ECHO_LINES_AT_MOST = 6


def _content_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def echo_targets(code: str, context: str) -> tuple[tuple[str, ...], ...]:
    """For each place the code occurs in the context: the first lines after it (stripped).

    Places are found by content lines (stripped, blanks skipped), as answer.echo_scan compares: a
    method is sent dedented, and its copy in the file is indented. Enough lines to hold
    ECHO_LINES and one with a letter or digit (`}` then `}` says nothing); none where the
    span itself holds that run (an echo could not be told apart).
    """
    span_lines = _content_lines(code)
    if not span_lines:
        return ()
    file_lines = _content_lines(context.replace("\r\n", "\n"))
    count = len(span_lines)
    targets = []
    for at in range(len(file_lines) - count + 1):
        if file_lines[at] != span_lines[0] or file_lines[at:at + count] != span_lines:
            continue
        lines = []
        for line in file_lines[at + count:at + count + _ECHO_LINES_AT_MOST]:
            lines.append(line)
            if len(lines) >= ECHO_LINES and any(ch.isalnum() for ch in "".join(lines)):
                break
        else:
            lines = []  # the file ends (or stays punctuation) too soon to tell
        if lines and not _holds_run(span_lines, lines) and tuple(lines) not in targets:
            targets.append(tuple(lines))
    return tuple(targets)


def _holds_run(lines: list[str], run: list[str]) -> bool:
    return any(lines[i:i + len(run)] == run for i in range(len(lines) - len(run) + 1))


_OPENING_FENCE = re.compile(r"^(`{3,})[^\n`]*\n", re.MULTILINE)


def last_code_block(text: str) -> str | None:
    """The last complete fenced block of a prompt, from its opening fence to its closing one:
    build_prompt puts the code to edit last, so this is the answer predicted if nothing changes."""
    block = None
    position = 0
    while opening := _OPENING_FENCE.search(text, position):
        closing = re.compile(rf"^{opening.group(1)}[ \t]*$", re.MULTILINE).search(text, opening.end())
        if closing is None:
            break
        block = text[opening.start():closing.start() + len(opening.group(1))]
        position = closing.end()
    return block


def prediction_ids(tokenizer, text: str) -> list[int]:
    """The tokens of the answer predicted if nothing changes: `text`, then the end of the turn."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    return ids + ([eos] if eos is not None else [])
