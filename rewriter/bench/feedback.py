"""`rewriter bench CASES --tests --feedback`: a second try for each case the first answer did not
pass, as Aider's benchmark gives one.

The second try's conversation goes on from the first: the case's prompt, the first answer as the
assistant's turn, then what became of it (the end of the failed tests' output, the refusal's
reason, "unchanged", "no code block") and the instruction again. The model never sees the tests
themselves, only their output. The file is the prediction again.
"""
from __future__ import annotations

from ..prompt import RewritePrompt, SourceText, build_prompt
from .cases import Case

TAIL_LINES = 50  # of the test output shown to the model


def output_tail(output: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a program's output."""
    return "\n".join(output.rstrip("\n").splitlines()[-lines:])


def feedback_message(verdict: dict, instruction: str, timeout_s: float) -> str:
    """What the model is told about its first answer (a judged verdict, see bench.judge_answer)."""
    outcome = verdict["outcome"]
    if outcome == "refused":
        told = f"That answer was refused, so it was not applied: {verdict['reason']}."
    elif outcome == "unchanged":
        told = "That is the code unchanged: it does not do what the instruction asks yet."
    elif outcome == "no_code_block":
        told = "That answer has no code block, so nothing could be applied."
    elif outcome == "timed_out":
        told = f"The tests did not finish within {timeout_s:g} seconds on that code."
    else:
        told = "The tests failed on that code."
    output = verdict.get("test_output", "")
    if output and outcome != "refused":
        told += f" The end of their output:\n```\n{output_tail(output)}\n```"
    return (f"{told}\n\nFix the code. Instruction: {instruction.strip()}\n"
            "Reply with the complete edited code in a single fenced code block.")


def feedback_prompt(case: Case, first_answer: str, verdict: dict, timeout_s: float) -> RewritePrompt:
    """The case's prompt, the first answer, and what became of it."""
    first = build_prompt(SourceText.from_text(case.before).code, case.instruction, case.language)
    messages = [*first.messages, {"role": "assistant", "content": first_answer},
                {"role": "user", "content": feedback_message(verdict, case.instruction, timeout_s)}]
    return RewritePrompt(messages=messages, prediction=first.prediction, fence=first.fence)
