"""The snippet styles cut from a reference edit's diff, and the per-style report of
`rewriter bench --snippets`: exact, passing the tests, right, and what went to the model. Torch-free."""
from __future__ import annotations

import json

import pytest

from rewriter.bench.command import bench_command
from rewriter.bench.snippet_cases import NoReferenceEdits, reference_edit_paths
from rewriter.bench.snippet_style_bench import (
    PassJudge,
    format_style_report,
    parse_styles,
    reason_kind,
    run_style_bench,
)
from rewriter.bench.snippet_styles import MARKER, STYLES, hunk_spans, style_cases, style_snippet
from rewriter.cli import build_parser
from rewriter.edits.snippets.merge import Merged, Refused, ToModel
from rewriter.engine import SamplingParams

BEFORE = '''import os


def load(path):
    with open(path) as handle:
        lines = handle.read().splitlines()
    lines = [line.strip() for line in lines]
    return lines


def save(path, lines):
    text = "".join(lines)
    with open(path, "w") as handle:
        handle.write(text)


def count(path):
    total = 0
    for line in load(path):
        total += 1
    return total


def exists(path):
    return os.path.exists(path)
'''
AFTER = BEFORE.replace("    lines = [line.strip() for line in lines]\n",
                       "    lines = [line.rstrip() for line in lines]\n    lines = [line for line in lines if line]\n"
                       ).replace("total += 1", "total += len(line)")
REMOVED = "lines = [line.strip() for line in lines]"

HUNKS_2 = '''# ... existing code ...
    with open(path) as handle:
        lines = handle.read().splitlines()
    lines = [line.rstrip() for line in lines]
    lines = [line for line in lines if line]
    return lines

# ... existing code ...
    total = 0
    for line in load(path):
        total += len(line)
    return total

# ... existing code ...
'''
HUNKS_0 = '''# ... existing code ...
    lines = [line.rstrip() for line in lines]
    lines = [line for line in lines if line]
    # ... existing code ...
        total += len(line)
    # ... existing code ...
'''


def snippet(style: str) -> str:
    return style_snippet(BEFORE, AFTER, style)


def test_hunks_2_holds_two_lines_of_context_and_the_added_lines_with_markers_for_the_hidden_code():
    assert snippet("hunks_2") == HUNKS_2  # the file's indentation kept: the first hunk starts mid-function


def test_hunks_0_holds_the_added_lines_alone_each_marker_indented_as_the_code_it_hides():
    assert snippet("hunks_0") == HUNKS_0


def test_hunks_5_reaches_the_files_end_so_no_marker_follows_it():
    text = snippet("hunks_5")
    assert text.startswith(MARKER + "\n\n\ndef load(path):\n")  # only `import os` hidden above
    assert text.endswith("def exists(path):\n    return os.path.exists(path)\n")
    assert text.count(MARKER) == 2 and '    # ... existing code ...\n        handle.write(text)' not in text
    assert '    ' + MARKER + '\n' in text  # between the hunks: `with open(path, "w")...` hidden, indented


def test_no_hunk_style_shows_the_removed_line():
    for style in STYLES:
        if style.startswith("hunks"):
            assert REMOVED not in snippet(style), style
            assert "total += len(line)" in snippet(style), style


def test_the_selected_hunks_are_hunks_2_with_the_first_code_line_from_its_code_on():
    first = next(line for line in HUNKS_2.splitlines(keepends=True) if line.strip() and MARKER not in line)
    assert first.startswith("    ")
    assert snippet("hunks_2_selected") == HUNKS_2.replace(first, first.lstrip(), 1)


def test_the_bare_hunks_have_no_markers_and_one_blank_line_between_hunks():
    bare = snippet("hunks_2_bare")
    assert "..." not in bare and "existing" not in bare
    first, second = [part for part in HUNKS_2.split(MARKER + "\n") if part.strip()]
    assert bare == first + "\n" + second


@pytest.mark.parametrize("style, marker", [("hunks_2_dots", "..."), ("hunks_2_slashes", "// ..."),
                                           ("hunks_2_rest", "# rest unchanged")])
def test_the_marker_variants_are_hunks_2_with_another_marker(style, marker):
    assert snippet(style) == HUNKS_2.replace(MARKER, marker)


def test_definitions_shows_the_changed_functions_whole_and_markers_for_the_rest():
    text = snippet("definitions")
    assert "def load(path):\n    with open(path) as handle:" in text and "    total = 0\n" in text
    assert "handle.write(text)" not in text and "import os" not in text and REMOVED not in text
    assert text.startswith(MARKER) and text.rstrip().endswith(MARKER)


def test_a_deletion_without_context_shows_nothing_but_a_marker_and_with_context_its_neighbours():
    after = BEFORE.replace("    lines = [line.strip() for line in lines]\n", "")
    assert style_snippet(BEFORE, after, "hunks_0") == MARKER + "\n"
    assert hunk_spans(BEFORE, after, 0) == []
    two = style_snippet(BEFORE, after, "hunks_2")
    assert "        lines = handle.read().splitlines()\n    return lines\n" in two


def test_an_edit_that_changes_nothing_has_no_hunks_and_hides_the_whole_file():
    assert hunk_spans(BEFORE, BEFORE, 2) == [] and style_snippet(BEFORE, BEFORE, "hunks_2") == MARKER + "\n"


def test_every_edit_is_cut_in_every_style_in_order():
    rows = [{"id": "a", "before": BEFORE, "after": AFTER}, {"id": "b", "before": BEFORE, "after": BEFORE + "\nX = 1\n"}]
    cases = style_cases(rows, ["hunks_2", "definitions"])
    assert [(case.id, case.style) for case in cases] == [("a", "hunks_2"), ("a", "definitions"),
                                                         ("b", "hunks_2"), ("b", "definitions")]
    assert cases[0].snippet == HUNKS_2 and cases[0].unsolvable == ""


def test_styles_are_parsed_and_unknown_ones_named():
    assert parse_styles(None) == list(STYLES) and parse_styles("hunks_0, definitions") == ["hunks_0", "definitions"]
    with pytest.raises(ValueError, match="unknown style hunks_9: the styles are definitions, hunks_0"):
        parse_styles("hunks_2,hunks_9")


# ---- the report --------------------------------------------------------------------------------

WRONG = AFTER.replace("total += len(line)", "total += 2")  # merged, not exact, and fails the tests
PASSING = AFTER.replace("    return total\n", "    return total  # counted\n")  # not exact, passes


def fake_merge(outcomes: dict[str, object]):
    """A merge that answers by the style the snippet was cut in (found by the snippet itself)."""
    by_snippet = {style_snippet(BEFORE, AFTER, style): outcome for style, outcome in outcomes.items()}
    return lambda before, snippet, language, instruction: by_snippet[snippet]


OUTCOMES = {"definitions": Merged(AFTER, 0.001), "hunks_2": Merged(PASSING, 0.002), "hunks_5": Merged(WRONG, 0.003),
            "hunks_0": ToModel("line 2 of the snippet lies between two markers", 0.004),
            "hunks_2_bare": Refused("the snippet matches nothing in the file", seconds=0.005)}


def fake_report(tests: dict[str, str], reference_passes: bool = True) -> tuple[dict, list[str]]:
    ran: list[str] = []

    def run(code: str, tests: str, timeout_s: float) -> bool:
        ran.append(code)
        return reference_passes if code == AFTER else code == PASSING

    rows = [{"id": "edit", "before": BEFORE, "after": AFTER}]
    report = run_style_bench(style_cases(rows, list(OUTCOMES)), PassJudge(tests, run=run), large_file=False,
                             merge=fake_merge(OUTCOMES))
    return report, ran


def counts(summary: dict) -> tuple:
    return tuple(summary[key] for key in ("cases", "exact", "tested", "passes", "right", "merged", "wrong",
                                          "to_model", "refused"))


def test_right_is_exact_or_passing_the_tests_and_tests_run_only_for_inexact_merges():
    report, ran = fake_report({"edit": "assert count"})
    styles = report["styles"]
    assert counts(styles["definitions"]) == (1, 1, 1, 1, 1, 1, 0, 0, 0)  # exact: passes as the reference does
    assert counts(styles["hunks_2"]) == (1, 0, 1, 1, 1, 1, 0, 0, 0)  # not exact, passes the tests: right
    assert counts(styles["hunks_5"]) == (1, 0, 1, 0, 0, 1, 1, 0, 0)  # merged but wrong
    assert counts(styles["hunks_0"]) == (1, 0, 1, 0, 0, 0, 0, 1, 0)
    assert counts(styles["hunks_2_bare"]) == (1, 0, 1, 0, 0, 0, 0, 0, 1)
    assert counts(report["summary"]) == (5, 1, 5, 2, 2, 3, 1, 1, 1)
    assert ran == [AFTER, PASSING, WRONG]  # the reference once, then each inexact merge; nothing for the exact one
    assert report["styles"]["hunks_5"]["max_ms"] == pytest.approx(3.0)
    text = format_style_report(report)
    assert "right merges (exact, or passing the tests): 2/5 (40.0%); to the model: 1 cases" in text
    assert [line.split()[:6] for line in text.splitlines() if line.startswith("hunks_2 ")] == [
        ["hunks_2", "1", "0", "1/1", "1", "100.0%"]]
    assert "hunks_0: why not merged (top 5)" in text and "to_model line N of the snippet lies between" in text


def test_without_tests_right_is_exact_and_no_test_runs():
    report, ran = fake_report({})
    assert counts(report["summary"]) == (5, 1, 0, 0, 1, 3, 2, 1, 1) and ran == []


def test_a_reference_that_fails_its_own_tests_judges_no_merge_right_but_the_exact_one():
    report, ran = fake_report({"edit": "assert count"}, reference_passes=False)
    assert counts(report["summary"])[:5] == (5, 1, 5, 0, 1) and ran == [AFTER]
    assert report["reference_fails"] == ["edit"]


def test_a_real_merge_and_a_real_test_run():
    # the definitions style merged by the real merge is exact; a passing inexact merge runs the real tests
    tests = "assert perimeter(1, 2) == 6\n"
    before = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return w + h\n"
    after = before.replace("return w + h", "return 2 * (w + h)")
    rows = [{"id": "p", "before": before, "after": after, "tests": tests}]
    report = run_style_bench(style_cases(rows, ["definitions"]), PassJudge({"p": tests}, timeout_s=20),
                             large_file=False)
    assert counts(report["summary"])[:5] == (1, 1, 1, 1, 1) and report["test_runs"] == 1
    judge = PassJudge({"p": tests}, timeout_s=20)
    case = style_cases(rows, ["hunks_2"])[0]
    assert judge.passes(case, after.replace("2 * (w + h)", "(w + h) * 2"), exact=False) is True
    assert judge.passes(case, before, exact=False) is False and judge.runs == 3


def test_reasons_count_together_with_their_names_and_numbers_blanked():
    assert reason_kind("`load` is defined 2 times at line 12") == reason_kind("`save` is defined 3 times at line 4")
    assert reason_kind("the snippet's line 'x = f(1)' matches nothing") == "the snippet's line … matches nothing"


# ---- where the reference edits are found, and the command ---------------------------------------

def test_the_reference_edits_are_the_files_named_else_the_bench_dir_else_shared_bench(tmp_path):
    named = tmp_path / "mine.jsonl"
    named.write_text("")
    assert reference_edit_paths([str(named)]) == [named]
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "editeval_tests.jsonl").write_text("")
    assert reference_edit_paths(environ={"REWRITER_BENCH_DIR": str(folder)}) == [folder / "editeval_tests.jsonl"]
    work = tmp_path / "work"
    work.mkdir()
    shared = tmp_path / "shared" / "bench"
    shared.mkdir(parents=True)
    (shared / "nofuneval_maintainability.jsonl").write_text("")
    assert reference_edit_paths(environ={}, cwd=work) == [shared.resolve() / "nofuneval_maintainability.jsonl"]
    with pytest.raises(NoReferenceEdits, match=r"no reference edits .* \(\$REWRITER_BENCH_DIR is not set\)"):
        reference_edit_paths(environ={}, cwd=shared)  # shared/shared/bench: none
    with pytest.raises(NoReferenceEdits, match="in \\$REWRITER_BENCH_DIR"):
        reference_edit_paths(environ={"REWRITER_BENCH_DIR": str(work)})
    with pytest.raises(NoReferenceEdits, match="no such file"):
        reference_edit_paths([str(tmp_path / "absent.jsonl")])


def bench(*args: str) -> tuple[int, list[str]]:
    said: list[str] = []
    parsed = build_parser().parse_args(["bench", *args])
    return bench_command(parsed, SamplingParams(), lambda *given, **options: None, said.append), said


@pytest.fixture
def edits(tmp_path):
    path = tmp_path / "edits.jsonl"
    path.write_text(json.dumps({"id": "e", "before": BEFORE, "after": AFTER}) + "\n")
    return path


def test_the_command_reports_the_styles_asked_for(edits, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code, said = bench("--snippets", str(edits), "--styles", "definitions,hunks_2_bare", "--json", str(report_path))
    assert code == 0, said
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:4]]
    assert rows == ["definitions", "hunks_2_bare", "all"]
    report = json.loads(report_path.read_text())
    assert list(report["styles"]) == ["definitions", "hunks_2_bare"] and report["summary"]["cases"] == 2


@pytest.mark.parametrize("args, words", [
    (["--styles", "hunks_7"], "unknown style hunks_7"),
    (["--styles", "hunks_2", "--random-style"], "--styles (for the report of every style"),
])
def test_style_options_that_do_not_fit_are_refused(edits, args, words):
    code, said = bench("--snippets", str(edits), *args)
    assert code == 2 and words in said[-1]


def test_no_reference_edits_found_is_said_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_BENCH_DIR", str(tmp_path))
    code, said = bench("--snippets")
    assert code == 2 and "no reference edits" in said[-1] and str(tmp_path) in said[-1]
    assert bench("--styles", "hunks_2")[0] == 2  # --styles without --snippets
