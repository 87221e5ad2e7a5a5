"""The service's apply model, `rewriter-apply`: Morph's apply format over chat completions, so
that a tool which lets users set an OpenAI-compatible "apply model" can merge with this one.

A request is one user message, `<instruction>...</instruction><code>...</code><update>...</update>`
(the instruction may be left out, as in Morph's older format); the answer is the merged code,
whole, as the assistant's message. The deterministic snippet merge (edits/snippets/merge.py) answers at
once, without the worker; where it finds the update ambiguous, the model merges it (backend.py's
`apply`: the code is the target and the prediction, the update rides in the instruction, and the
answer is judged like any rewrite). A merge either refuses is an error (422, `merge_refused`).
Torch-free: the merge and the parsing run before anything is queued.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..edits.definitions import guess_language
from ..edits.snippets.merge import Merged, Refused, ToModel, merge_snippet
from .chat_request import ChatRequest
from .schema import ApiError

APPLY_MODEL = "rewriter-apply"
FORMAT = "<instruction>...</instruction><code>...</code><update>...</update>"
_INSTRUCTION = re.compile(r"\s*<instruction>(.*?)</instruction>\s*", re.DOTALL)
_CODE_END = re.compile(r"</code>\s*<update>")
_UPDATE_END = "</update>"


@dataclass(frozen=True)
class ApplyRequest:
    instruction: str  # "" when the message has none
    code: str  # exactly as sent between <code> and </code>
    update: str  # the snippet: the changed code, with markers for what stays
    language: str  # guessed from the code (the format names none); "" when no grammar parses it


def parse_apply(chat: ChatRequest) -> ApplyRequest:
    """The apply request in a chat request for APPLY_MODEL; an ApiError (400) for anything else."""
    roles = [message["role"] for message in chat.messages]
    if roles != ["user"]:
        raise ApiError(400, f"Invalid 'messages': {APPLY_MODEL} takes one user message in Morph's apply format "
                       f"({FORMAT}), not {len(roles)} message(s) ({', '.join(roles)}).", param="messages",
                       code="invalid_value")
    if chat.prediction is not None:
        raise ApiError(400, f"Invalid parameter: {APPLY_MODEL} predicts the merge from <code> itself; leave out "
                       "'prediction'.", param="prediction", code="unsupported_parameter")
    if chat.stop:
        raise ApiError(400, f"Invalid parameter: {APPLY_MODEL} answers with the whole merged code; leave out "
                       "'stop'.", param="stop", code="unsupported_parameter")
    instruction, code, update = split_apply_message(chat.messages[0]["content"])
    return ApplyRequest(instruction, code, update, guess_language(code) or guess_language(update))


def split_apply_message(content: str) -> tuple[str, str, str]:
    """(instruction, code, update) of a message in Morph's apply format. The code ends at the
    first `</code>` that an `<update>` follows, the update at the message's last `</update>`."""
    opening = _INSTRUCTION.match(content)
    instruction = opening.group(1).strip() if opening else ""
    at = opening.end() if opening else len(content) - len(content.lstrip())
    if not content.startswith("<code>", at):
        raise _format_error("it must start with <code> (after an optional <instruction>...</instruction>)")
    code_end = _CODE_END.search(content, at + len("<code>"))
    if code_end is None:
        raise _format_error("no </code> followed by <update> was found")
    rest = content[code_end.end():].rstrip()
    if not rest.endswith(_UPDATE_END):
        raise _format_error("it must end with </update>")
    update = rest[:-len(_UPDATE_END)]
    if not update.strip():
        raise ApiError(400, "The <update> is empty: send the changed code, with markers such as "
                       "`// ... existing code ...` for what stays.", param="messages[0].content", code="invalid_value")
    return instruction, content[at + len("<code>"):code_end.start()], update


def _format_error(problem: str) -> ApiError:
    return ApiError(400, f"Invalid 'messages[0].content' for {APPLY_MODEL}: {problem}. The message must be "
                    f"{FORMAT}.", param="messages[0].content", code="invalid_value")


def merge_refused(reason: str) -> ApiError:
    return ApiError(422, f"The update was not merged: {reason}. Nothing was changed.", param="messages[0].content",
                    code="merge_refused")


def merge_update(apply: ApplyRequest) -> Merged | ToModel:
    """The deterministic merge: Merged, or ToModel (for the model); a refusal raises."""
    outcome = merge_snippet(apply.code, apply.update, apply.language, apply.instruction)
    if isinstance(outcome, Refused):
        raise merge_refused(outcome.reason)
    return outcome


def parsed_and_merged(chat: ChatRequest) -> tuple[ApplyRequest, Merged | ToModel]:
    apply = parse_apply(chat)
    return apply, merge_update(apply)
