"""Answers that start or run past the span: the prefilled opening and the echo stop (issue 17)."""
import random

import pytest

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.answer import echo_scan, extract_code
from rewriter.decoding.decode import Decoder
from rewriter.decoding.rewrite import AnswerEnd, Rewriter
from rewriter.engine import EditRequest
from rewriter.prompt import answer_opening, build_prompt, echo_targets
from rewriter.results import Progress, RewriteResult
from rewriter.weights.models import load_model
from tests.helpers.models import greedy_reference, tiny_model
from tests.helpers.scripted_model import ScriptedDecoder

FILE = '''import os


def first(value):
    return value + 1


def second(value):
    return value * 2


def third(value):
    return value - 3
'''
SECOND = "def second(value):\n    return value * 2\n"


def test_the_prefill_is_the_fence_and_the_opening_up_to_the_name():
    fence = "```python\n"
    assert answer_opening("    def area(self):\n        pass\n", "Add a docstring.", fence) == fence + "    def area"
    assert answer_opening("@cache\ndef area(r):\n", "Add type hints.", fence) == fence + "@cache"
    assert answer_opening("class Shape(Base):\n", "Add a docstring.", fence) == fence + "class Shape"
    assert answer_opening("class Shape:\n", "Add a docstring.", fence) == fence + "class Shape"
    assert answer_opening("func (r *Reader) Read(p []byte) {\n", "Simplify.", fence) == fence + "func (r *Reader) Read"
    assert answer_opening("x = 1\n", "Simplify.", fence) == fence  # no name to pin


def test_a_rename_keeps_the_name_to_the_model():
    fence = "```python\n"
    # Without the space before the name: the model writes " name" as one token.
    assert answer_opening("    def area(self):\n", "Rename this function to a more descriptive name.", fence) == fence + "    def"
    assert answer_opening("def f(x):\n", "Give it a better name", fence) == fence + "def"


def test_only_a_span_with_context_gets_a_prefill_and_echo_targets():
    whole = build_prompt(FILE, "Add docstrings.", "python")
    assert whole.prefill == "" and whole.echo_targets == ()
    span = build_prompt(SECOND, "Add a docstring.", "python", context=FILE)
    assert span.prefill == "```python\ndef second"
    assert span.prediction.startswith(span.prefill)
    assert span.echo_targets == (("def third(value):", "return value - 3"),)


def test_echo_targets_need_a_line_with_letters_and_a_file_that_goes_on():
    js = "function a() {\n  return 1;\n}\n"
    context = "class A {\n" + js + "}\n}\n\nexport default A;\n"
    assert echo_targets(js, context) == (("}", "}", "export default A;"),)
    assert echo_targets("def third(value):\n    return value - 3\n", FILE) == ()  # the file ends
    assert echo_targets(SECOND, FILE.replace("\n", "\r\n")) == (("def third(value):", "return value - 3"),)
    # The span itself holds the lines that follow it: an echo could not be told from the span.
    twice = "x = 1\ny = 2\nx = 1\ny = 2\n"
    assert echo_targets("x = 1\ny = 2\nx = 1\ny = 2\n", twice + "x = 1\ny = 2\n") == ()


CLASS = '''class Shape:
    def area(self):
        return self.w * self.h

    def perimeter(self):
        return 2 * (self.w + self.h)
'''
AREA = "def area(self):\n    return self.w * self.h\n"  # the method as it is sent: dedented


def test_a_method_sent_dedented_is_found_in_its_indented_class():
    assert echo_targets(AREA, CLASS) == (("def perimeter(self):", "return 2 * (self.w + self.h)"),)
    answer = ('```python\ndef area(self):\n    """The area."""\n    return self.w * self.h\n\n'
              'def perimeter(self):\n    return 2 * (self.w + self.h)\n```\n')
    assert echo_scan(answer, echo_targets(AREA, CLASS)).cut == answer.index("def perimeter")


def test_an_answer_that_runs_into_the_next_function_is_cut_where_the_copy_begins():
    targets = echo_targets(SECOND, FILE)
    answer = ('```python\ndef second(value):\n    """Double it."""\n    return value * 2\n\n\n'
              'def third(value):\n    return value - 3\n')
    scan = echo_scan(answer, targets)
    assert scan.cut == answer.index("def third")
    assert extract_code(answer[: scan.cut]).rstrip() == 'def second(value):\n    """Double it."""\n    return value * 2'


def test_one_line_equal_to_the_next_line_of_the_file_is_the_edit_own():
    # The edit ends with the line that also begins what follows, once: not an echo.
    targets = echo_targets(SECOND, FILE)
    answer = "```python\ndef second(value):\n    return value * 2\n    def third(value):\n```\n"
    assert echo_scan(answer, targets).cut is None
    answer = "```python\ndef second(value):\n    x = value * 2\n    return value - 3\n```\n"
    assert echo_scan(answer, (("return value - 3", "def fourth():"),)).cut is None


def test_lines_that_may_begin_an_echo_are_held_back_until_the_next_one_tells():
    targets = echo_targets(SECOND, FILE)
    start = "```python\ndef second(value):\n    return value * 2\n\n\n"
    assert echo_scan(start + "def thi", targets).settled == len(start)  # may begin the copy
    assert echo_scan(start + "print(1)", targets).settled == len(start + "print(1)")
    held = start + "def third(value):\n"
    assert echo_scan(held, targets).settled == len(start)
    assert echo_scan(held + "    return 0\n", targets).settled == len(held + "    return 0\n")
    # Past the closing fence nothing is code: no echo, nothing held.
    closed = "```python\ndef second(value):\n```\ndef third(value):\n    return value - 3\n"
    assert echo_scan(closed, targets) == type(echo_scan(closed, targets))(None, len(closed))


class LineTokenizer:
    """Ids to text with line breaks: every 9th id is a newline, the rest letters."""

    eos_token_id = 255

    def decode(self, ids, skip_special_tokens=True):
        return "".join("\n" if i % 9 == 0 else chr(0x61 + i % 26) for i in ids
                       if not (skip_special_tokens and i == self.eos_token_id))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_echo_stop_keeps_plain_greedy_tokens_up_to_the_copy(seed):
    """A stopping rule only: the tokens kept are greedy's, and the fewest that reach the cut."""
    model = tiny_model(seed=seed, eos_token_id=255)
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(40)]
    reference = greedy_reference(model, prompt, 200)
    tokenizer = LineTokenizer()
    prefill = "```\n"
    text = prefill + tokenizer.decode(reference)
    lines = [line for line in text[len(prefill):].split("\n") if line.strip()]
    assert len(lines) >= 5, "the tiny model's greedy text needs lines for this test"
    # The "file after the span" begins with greedy's 3rd and 4th lines: an echo once written.
    targets = ((lines[2], lines[3]),)
    cut = echo_scan(text, targets).cut
    assert cut is not None
    stop = AnswerEnd(tokenizer, prefill, targets)
    drafter = CombinedDrafter(PredictionDrafter(reference[:30] + reference[60:]), PromptLookupDrafter())
    steps = list(Decoder(model, tokenizer).generate(prompt, drafter, 200, stop))
    # The stop looks back past tokens that earlier steps yielded: the kept ones are counted.
    kept = [t for step in steps for t in step.tokens][: steps[-1].stats.output_tokens]
    assert steps[-1].done and steps[-1].stats.finish_reason == "stop"
    assert kept == reference[: len(kept)]
    assert stop.cut == cut
    assert len(prefill + tokenizer.decode(kept)) >= cut > len(prefill + tokenizer.decode(kept[:-1]))


@pytest.fixture(scope="module")
def tiny_rewriter(tiny_checkpoint):
    return Rewriter(load_model(str(tiny_checkpoint)))


def test_a_prefilled_answer_is_plain_greedy_of_the_prompt_with_the_prefill(tiny_rewriter, qwen_tokenizer):
    instruction = "Add a docstring."
    prompt = build_prompt(SECOND, instruction, "python", context=FILE)
    prompt_ids, prediction, _ = tiny_rewriter.plan(SECOND, instruction, "python", FILE)
    prefill_ids = qwen_tokenizer.encode(prompt.prefill, add_special_tokens=False)
    assert prompt_ids[-len(prefill_ids):] == prefill_ids
    assert qwen_tokenizer.decode(prediction) == prompt.prediction[len(prompt.prefill):] + "<|im_end|>"
    events = list(tiny_rewriter.stream(EditRequest(SECOND, instruction, "python", FILE, max_new_tokens=40)))
    result = events[-1]
    assert isinstance(result, RewriteResult)
    assert "".join(e.text for e in events if isinstance(e, Progress)) == result.answer
    reference = greedy_reference(tiny_rewriter.loaded.model, prompt_ids, result.stats.output_tokens)
    assert result.answer == prompt.prefill + qwen_tokenizer.decode(reference, skip_special_tokens=True)


def scripted_rewrite(qwen_tokenizer, generated: str, code: str = SECOND, context: str = FILE):
    from types import SimpleNamespace

    loaded = SimpleNamespace(tokenizer=qwen_tokenizer, context_length=4096)
    rewriter = Rewriter(loaded, decoder=ScriptedDecoder(qwen_tokenizer, generated))
    events = list(rewriter.stream(EditRequest(code, "Add a docstring.", "python", context)))
    return [e.text for e in events if isinstance(e, Progress)], events[-1]


def test_the_copy_of_the_next_function_is_neither_streamed_nor_applied(qwen_tokenizer):
    # The model's answer after the prefill "```python\ndef second": the span, then the file going on.
    generated = ('(value):\n    """Double the value."""\n    return value * 2\n\n\n'
                 'def third(value):\n    return value - 3\n```\n')
    pieces, result = scripted_rewrite(qwen_tokenizer, generated)
    expected = 'def second(value):\n    """Double the value."""\n    return value * 2\n'
    assert result.text == expected
    assert "third" not in "".join(pieces) and "third" not in result.answer
    assert "".join(pieces) == result.answer
    assert result.stats.echo_dropped_chars == len("def third(value):\n    return value - 3\n")


def test_the_copy_of_the_next_method_stops_decoding_too(qwen_tokenizer):
    # After the prefill "```python\ndef area": the method, then the class going on (dedented, as
    # the model writes it); decoding stops at the copy, which is never streamed.
    generated = ('(self):\n    """The area."""\n    return self.w * self.h\n\n'
                 'def perimeter(self):\n    return 2 * (self.w + self.h)\n```\n')
    pieces, result = scripted_rewrite(qwen_tokenizer, generated, AREA, CLASS)
    assert result.text == 'def area(self):\n    """The area."""\n    return self.w * self.h\n'
    assert "perimeter" not in "".join(pieces) and "perimeter" not in result.answer
    assert result.stats.echo_dropped_chars > 0


def test_an_edit_whose_last_line_is_the_next_line_of_the_file_is_applied_whole(qwen_tokenizer):
    generated = '(value):\n    """Double the value."""\n    return value * 2\n    def third(value):\n```\n'
    pieces, result = scripted_rewrite(qwen_tokenizer, generated)
    assert result.text == 'def second(value):\n    """Double the value."""\n    return value * 2\n    def third(value):\n'
    assert "".join(pieces) == result.answer and result.stats.echo_dropped_chars == 0
