"""`--self-test`: the model writes tests of the behaviour asked for, and they choose among the
candidate answers, blind (no test of the user's is needed).

The model is asked once, with the original code and the instruction, to leave the code as it
is and write a few short test functions after it (the code is the prediction: it is copied in
few passes). Its test functions, and the imports it wrote, are kept; each candidate (today's
choice first, then the first answer's branches and a few sampled answers that pass every check)
runs them, the file with the candidate in place followed by the tests, each test function
called in turn, in a child Python in a fresh temporary directory with a time limit (testrun.py:
never in the user's tree, no network, no new processes; not a security sandbox). The candidate
that passes most wins; on a tie today's choice stays, or else the earlier candidate.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field, replace

from ..engine import EditRequest
from .testrun import run_tests

MAX_TESTS = 5  # test functions asked for
MAX_CHECKS = 12  # asserts kept, each run as a test of its own
SAMPLES = 1  # sampled answers added to the candidates, beside the branches
# The answer's budget: the code copied (about a token per 3 characters, rounded up) and this much
# for the tests; a model that runs on is cut there, and the tests it finished are kept.
TEST_TOKENS = 256
TIMEOUT_S = 10.0  # one candidate's run of all the tests
RUN_NAME = "edited"  # the program's __name__: the file's `if __name__ == "__main__":` block does not run
MARK = "rewriter-self-test:"  # begins each line that says how a test went

# One wording (changed once, after the first case's answer ran to its budget in one test function
# of many asserts; not tried on the cases' outcomes).
TEST_INSTRUCTION = (
    "Do not change the code. After it, add at most {count} short test functions named test_..., each "
    "without arguments and with a single assert statement, that check the behaviour this change asks for "
    "once it is made: {instruction}"
)

# Calls each test function in turn and says how it went, so that a test that hangs or fails
# leaves the others' results.
RUNNER = """

for _self_test_name in {names!r}:
    try:
        globals()[_self_test_name]()
    except BaseException:  # a failing test, whatever it raised
        print({mark!r}, "failed", _self_test_name, flush=True)
    else:
        print({mark!r}, "passed", _self_test_name, flush=True)
"""


def test_request(request: EditRequest) -> EditRequest:
    """What the model is asked to write its tests: the same code, greedy, the tests after it."""
    instruction = TEST_INSTRUCTION.format(count=MAX_TESTS, instruction=request.instruction.strip())
    return replace(request, instruction=instruction, sampling=None,
                   max_new_tokens=-(-len(request.code) // 3) + TEST_TOKENS)


@dataclass(frozen=True)
class ModelTests:
    source: str  # the imports and test functions the model wrote, as it wrote them
    names: tuple[str, ...]  # the test functions, in order

    def program(self) -> str:
        """The tests and the runner that calls them, to follow the edited file."""
        return self.source + RUNNER.format(names=self.names, mark=MARK)


def tests_from(answer: str) -> ModelTests | None:
    """The model's top-level test functions and imports, each cut to what parses (an answer cut
    at its budget ends inside one); each assert of a test function a test of its own (a small
    model writes one function of many asserts, however asked), with the statements before it
    that are not asserts. At most MAX_CHECKS; None where there is none."""
    checks: list[tuple[str, str]] = []  # (name, source)
    imports: list[str] = []
    for chunk in _top_level_chunks(answer):
        node = _parsed(chunk)
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(ast.unparse(node))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test") and not node.args.args:
            checks += _one_assert_each(node)
    checks = checks[:MAX_CHECKS]
    if not checks:
        return None
    return ModelTests("\n\n".join([*imports, *(source for _, source in checks)]) + "\n",
                      tuple(name for name, _ in checks))


def _parsed(chunk: str) -> ast.stmt | None:
    """The one statement `chunk` holds, its last lines dropped until it parses; None if it never does."""
    lines = chunk.splitlines()
    while lines:
        try:
            body = ast.parse("\n".join(lines) + "\n").body
        except (SyntaxError, ValueError):
            lines.pop()
            continue
        return body[0] if len(body) == 1 else None
    return None


def _one_assert_each(test: ast.FunctionDef) -> list[tuple[str, str]]:
    """A test function of its asserts, one function each, with the body's other statements before it."""
    checks: list[tuple[str, str]] = []
    for index, statement in enumerate(test.body):
        if isinstance(statement, ast.Assert):
            setup = [s for s in test.body[:index] if not isinstance(s, ast.Assert)]
            name = f"{test.name}_{len(checks) + 1}"
            function = copy.copy(test)  # its name, arguments (none) and the rest as the model wrote them
            function.name, function.body, function.decorator_list = name, [*setup, statement], []
            checks.append((name, ast.unparse(function)))
    return checks


def _top_level_chunks(answer: str) -> list[str]:
    """The answer cut before each line that starts at column 0 with code (a statement, a
    definition, a decorator): one chunk a top-level statement, with what is indented under it."""
    chunks: list[list[str]] = [[]]
    for line in answer.splitlines():
        starts = line[:1] not in ("", " ", "\t", "#", ")", "]", "}")
        if starts and chunks[-1] and not chunks[-1][-1].lstrip().startswith("@"):
            chunks.append([])
        chunks[-1].append(line)
    return ["\n".join(chunk) + "\n" for chunk in chunks if chunk]


@dataclass(frozen=True)
class Score:
    """How one candidate did on the model's tests."""

    passed: tuple[str, ...]  # the test functions that returned without raising
    timed_out: bool
    seconds: float

    @property
    def count(self) -> int:
        return len(self.passed)


def score(file_text: str, tests: ModelTests, timeout_s: float | None = None) -> Score:
    """The model's tests run on the file as a candidate would leave it (TIMEOUT_S unless told)."""
    run = run_tests(file_text, tests.program(), TIMEOUT_S if timeout_s is None else timeout_s, run_name=RUN_NAME)
    passed = [line.split()[2] for line in run.output.splitlines()
              if line.startswith(MARK) and len(line.split()) == 3 and line.split()[1] == "passed"]
    return Score(tuple(name for name in tests.names if name in passed), run.timed_out, run.seconds)


def best(scores: list[Score], today: Score | None) -> int | None:
    """The candidate that passes most of the tests, the earlier on a tie, where it passes more than
    today's choice (`today`, None where today's answer was refused); None where today's stays."""
    if not scores:
        return None
    top = max(range(len(scores)), key=lambda i: (scores[i].count, -i))
    return top if scores[top].count > (today.count if today is not None else 0) else None


@dataclass
class SelfTestReport:
    """What the self-test did, for the front ends' reports and the bench."""

    tests: ModelTests | None  # None: the model wrote none that could run
    written: str = ""  # the code of the model's answer to the request for tests, as it wrote it
    today: Score | None = None  # today's choice (the edit, or the original where it is unchanged)
    today_text: str | None = None  # its span's text; None where today's answer was refused
    candidates: list[tuple[str, str, Score]] = field(default_factory=list)  # (origin, the span's text, score)
    chosen: int | None = None  # the candidate taken instead of today's choice
    seconds: float = 0.0  # writing the tests, decoding the other candidates, running the tests
    writing_seconds: float = 0.0  # of those, the model's answer with the tests

    @property
    def testing_seconds(self) -> float:
        """Of `seconds`, running the model's tests on today's choice and the candidates."""
        scores = [scored for _, _, scored in self.candidates] + ([self.today] if self.today else [])
        return sum(scored.seconds for scored in scores)

    @property
    def taken(self) -> bool:
        """Whether a candidate was taken instead of today's choice."""
        return self.chosen is not None

    def describe(self) -> str:
        """In words, for `apply`'s report."""
        if self.tests is None:
            return "the self-test wrote no tests that could run; the usual choice stands"
        total = len(self.tests.names)
        if self.chosen is None:
            today = f"{self.today.count} of {total}" if self.today is not None else "none"
            return (f"the model's {total} tests: the usual choice passed {today}, none of "
                    f"{len(self.candidates)} other candidates more")
        origin, _, taken = self.candidates[self.chosen]
        today = f"{self.today.count}" if self.today is not None else "none (refused)"
        return f"{origin} passed {taken.count} of the model's {total} tests, the usual choice {today}"
