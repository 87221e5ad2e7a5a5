"""`rewriter bench --random-weights`: the decoding core measured without a packaged model, every
run checked against transformers' greedy decoding token for token."""
import json

from tests.helpers.cli import assert_clean_failure, run_cli


def test_a_random_model_is_measured_side_by_side_and_checked_against_greedy(tmp_path):
    report = tmp_path / "report.json"
    result = run_cli("bench", "--random-weights", "tiny", "--device", "cpu", "--prompt-tokens", "40",
                     "--max-new-tokens", "24", "--reps", "1", "--json", str(report))
    assert result.returncode == 0, result.stderr
    shape = json.loads(report.read_text())["shapes"]["tiny"]
    assert shape["static_path"] is True and shape["device"] == "cpu"
    runs = ("greedy", "prompt_lookup", "ours_static_no_draft", "ours_static_unchanged", "ours_static_edited",
            "ours_dynamic_unchanged", "ours_dynamic_edited")
    assert all(shape[run]["identical"] and shape[run]["tokens"] == 24 for run in runs)
    # The reference drafted unchanged needs far fewer passes than plain greedy; every run says how many.
    assert shape["ours_static_unchanged"]["passes"] < shape["ours_static_no_draft"]["passes"] == 24
    assert set(shape["pass_ms"]["static"]) == {"1", "16", "64", "256"}
    assert "static_edited" in result.stderr and "dynamic_edited" in result.stderr  # the side-by-side table


def test_an_unknown_shape_or_a_case_file_is_refused(tmp_path):
    assert_clean_failure(run_cli("bench", "--random-weights", "7b"), "unknown shape 7b")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("")
    assert_clean_failure(run_cli("bench", str(cases), "--random-weights", "tiny"), "takes no cases")
