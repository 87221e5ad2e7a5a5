import pytest

from rewriter.answer import extract_code
from rewriter.engine import Turn
from rewriter.prompt import SourceText, build_prompt, fence_for, language_for, merge_instruction


def test_code_comes_before_the_instruction_so_requests_on_one_file_share_a_prefix():
    first = build_prompt("x = 1\n", "rename x to count", "python")
    second = build_prompt("x = 1\n", "add a docstring", "python")
    a, b = first.messages[-1]["content"], second.messages[-1]["content"]
    shared = next(i for i, (p, q) in enumerate(zip(a, b)) if p != q)
    assert a.index("x = 1") < shared
    assert first.prediction == "```python\nx = 1\n```"


def test_prediction_adds_the_newline_the_fence_needs():
    assert build_prompt("x = 1", "do it").prediction == "```\nx = 1\n```"
    assert build_prompt("", "write a function").prediction == "```\n```"


def test_fence_is_longer_than_backtick_runs_in_the_code():
    code = 'doc = """\n```python\nprint(1)\n```\n"""\n'
    fence = fence_for(code)
    assert fence == "````"
    answer = build_prompt(code, "keep").prediction
    assert extract_code(answer) == code


@pytest.mark.parametrize("text", ["a\r\nb\r\n", "a\r\nb", "a\nb\n", "a\nb", "", "\tx = 'é'\r\n"])
def test_source_text_round_trips_line_endings_and_final_newline(text):
    source = SourceText.from_text(text)
    assert "\r" not in source.code
    assert source.restore(source.code) == text


def test_restore_gives_edited_code_the_original_conventions():
    source = SourceText.from_text("a\r\nb\r\n")
    assert source.restore("a\nB\nc") == "a\r\nB\r\nc\r\n"
    assert SourceText.from_text("a\nb").restore("a\nb\n") == "a\nb"


def test_a_part_of_a_crlf_file_takes_the_file_s_line_endings_and_text_in_them_is_not_converted_twice():
    line = SourceText.from_text("    return x", "\r\n")  # one line: no ending of its own to go by
    assert line.native("return x\n# done") == "return x\r\n# done"
    assert line.native("a\r\nb\n") == "a\r\nb\r\n"  # an answer already in CRLF stays as it is
    assert line.lf("a\r\nb") == "a\nb" and SourceText.from_text("a\nb").lf("a\r\nb") == "a\r\nb"


def test_a_snippet_to_merge_goes_to_the_model_lf():
    assert "\r" not in merge_instruction("def f():\r\n    return 1\r\n", "python", "hint")


def test_language_for_common_extensions():
    assert language_for("a/b.py") == "python"
    assert language_for("x.TSX") == "tsx"
    assert language_for("Makefile") == ""


def test_a_refine_is_the_first_turns_prompt_then_its_answer_then_the_follow_up():
    file = "import os\n\n\ndef size(path):\n    return os.stat(path).st_size\n\n\nprint(size('.'))\n"
    span = "def size(path):\n    return os.stat(path).st_size\n"
    answer = "def size(path: str) -> int:\n    return os.stat(path).st_size\n"
    first = build_prompt(span, "Add type hints", "python", file)
    refine = build_prompt(answer, "Add a docstring", "python", file, conversation=(Turn(span, "Add type hints"),))
    # The first turn's messages as they were sent, so a model's cache of them (and of its answer) is the prefix.
    assert refine.messages[:2] == first.messages
    assert refine.messages[2] == {"role": "assistant", "content": f"```python\n{answer}```"}
    assert refine.messages[3]["role"] == "user" and refine.messages[3]["content"].endswith("Instruction: Add a docstring")
    assert refine.prediction == f"```python\n{answer}```"
    assert refine.prefill == "```python\ndef size"  # the answer's opening, as for any span
    assert refine.echo_targets == first.echo_targets  # the lines after the span in the file
    again = build_prompt(answer + "\n", "Make it async", "python", file,
                         conversation=(Turn(span, "Add type hints"), Turn(answer, "Add a docstring")))
    assert again.messages[:4] == refine.messages and [m["role"] for m in again.messages[4:]] == ["assistant", "user"]
