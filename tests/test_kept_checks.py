"""Kernel checks run once per machine's kernels: their answers are kept in the cache, keyed by
the CPU, the thread count and torch, and a cache that cannot be read is checked again."""
import torch

from rewriter import kept_checks
from rewriter.weights import attention


class _Check:
    def __init__(self, answer: bool):
        self.answer, self.calls = answer, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.answer


def test_a_check_runs_once_per_key_and_its_answer_is_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    check = _Check(False)
    assert kept_checks.kept_answer("rows", 2, check) is False
    assert kept_checks.kept_answer("rows", 2, check) is False and check.calls == 1
    assert kept_checks.kept_answer("rows", 1, check) is False and check.calls == 2  # another thread count
    other = _Check(True)
    assert kept_checks.kept_answer("columns", 2, other) is True and other.calls == 1
    assert kept_checks.kept_answer("rows", 2, other) is False and other.calls == 1


def test_a_cache_that_cannot_be_read_is_checked_again(tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    (tmp_path / "kernel-checks.json").write_text("{not json")
    check = _Check(True)
    assert kept_checks.kept_answer("rows", 2, check) is True and check.calls == 1
    assert kept_checks.kept_answer("rows", 2, check) is True and check.calls == 1


def test_the_attention_check_is_kept_with_the_answer_it_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    threads = torch.get_num_threads()
    computed = attention._check_float32_keeps_rows(2, 3, 16)
    attention._float32_keeps_rows.cache_clear()
    try:
        assert attention._float32_keeps_rows(2, 3, 16, threads) == computed
        key = kept_checks.check_key("float32 attention keeps rows 2x3x16", threads)
        assert kept_checks.read_entries(tmp_path / "kernel-checks.json")[key] == computed
    finally:
        attention._float32_keeps_rows.cache_clear()
