"""Prompt, prediction and answer extraction for one rewrite.

The code comes before the instruction so that later requests on the same file share the
longest prompt prefix (and its KV cache). The prediction is the answer we expect if the model
changes nothing: the opening fence, the code, the closing fence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

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
    def from_text(cls, text: str) -> SourceText:
        crlf = text.count("\r\n")
        newline = "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"
        code = text.replace("\r\n", "\n") if newline == "\r\n" else text
        return cls(code=code, newline=newline, final_newline=text.endswith("\n"))

    def restore(self, code: str) -> str:
        """Give edited code the original's line endings and final-newline convention."""
        code = code.rstrip("\n")
        if self.final_newline and code:
            code += "\n"
        return code.replace("\n", self.newline) if self.newline != "\n" else code


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
    prediction: str  # the answer text if nothing changes
    fence: str


def build_prompt(code: str, instruction: str, language: str = "", context: str | None = None) -> RewritePrompt:
    """Messages for the chat template and the predicted answer.

    `context` is the rest of the file when only a part (`code`) is rewritten.
    """
    fence = fence_for(code + (context or ""))
    body = code if code.endswith("\n") or not code else code + "\n"
    block = f"{fence}{language}\n{body}{fence}"
    parts = []
    if context:
        parts.append(f"The surrounding file, for context only:\n{fence}{language}\n{context.rstrip()}\n{fence}\n")
        parts.append(f"The code to edit:\n{block}")
    else:
        parts.append(block)
    parts.append(f"\nInstruction: {instruction.strip()}")
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]
    return RewritePrompt(messages=messages, prediction=block, fence=fence)


class NoCodeBlock(ValueError):
    """The model's answer holds no fenced code block."""


def extract_code(answer: str) -> str:
    """The code inside the first fenced block of the answer (unterminated blocks run to the end)."""
    opening = re.search(r"^(`{3,})[^\n`]*\n", answer, flags=re.MULTILINE)
    if not opening:
        raise NoCodeBlock("the model's answer has no fenced code block")
    fence = opening.group(1)
    rest = answer[opening.end():]
    closing = re.search(rf"^{fence}[ \t]*$", rest, flags=re.MULTILINE)
    return rest[: closing.start()] if closing else rest


def closing_fence_end(answer: str) -> int | None:
    """Index just past the closing fence line once it is complete (its newline written), else None."""
    opening = re.search(r"^(`{3,})[^\n`]*\n", answer, flags=re.MULTILINE)
    if not opening:
        return None
    fence = opening.group(1)
    closing = re.search(rf"^{fence}[ \t]*\n", answer[opening.end():], flags=re.MULTILINE)
    return opening.end() + closing.end() if closing else None
