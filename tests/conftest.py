"""Shared fixtures: tiny random models (fast, exact properties) and the embedded real model."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.helpers.models import QWEN_VOCAB, tiny_model
from tests.helpers.workers import pytest_collection_modifyitems  # noqa: F401  (a hook)

PROCESS_THREADS = torch.get_num_threads()  # before any test sets its own

# The property tests (tests/properties/): "ci", the default, runs the same 300 examples a property
# each time (derandomized: a gate that a new draw cannot fail); "long" (HYPOTHESIS_PROFILE=long)
# draws 5000 afresh each run, a search of hours; "quick" 30 afresh, while writing one. No deadline:
# a slow example on a busy machine is no failure. Failing examples of the random profiles are kept
# in .hypothesis/ (ignored by git) and replayed first next time; print_blob prints what reproduces
# one anywhere (@reproduce_failure).
_EXAMPLES = DirectoryBasedExampleDatabase(Path(__file__).resolve().parent.parent / ".hypothesis" / "examples")
settings.register_profile("long", max_examples=5000, deadline=None, print_blob=True, database=_EXAMPLES)
settings.register_profile("quick", settings.get_profile("long"), max_examples=30)
settings.register_profile("ci", settings.get_profile("long"), max_examples=300, derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_terminal_summary(terminalreporter):
    """The CPU beside the durations: CI's record keeps the end of the output, and its times mean
    little without the CPU they ran on."""
    from rewriter.machine import cpu_name_and_flags, kernels_identity

    terminalreporter.write_sep("-", f"CPU: {kernels_identity(*cpu_name_and_flags())}, {os.cpu_count()} cores")


@pytest.fixture(scope="session")
def embedded_checkpoint():
    """The embedded model, converted once into the cache (about a minute the first time)."""
    from rewriter.weights.models import resolve_checkpoint

    return resolve_checkpoint(None)


@pytest.fixture(scope="session")
def qwen_tokenizer(embedded_checkpoint):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_checkpoint)


@pytest.fixture(scope="session")
def embedded(embedded_checkpoint):
    from rewriter.weights.models import load_model

    # Loaded under the process's own thread count, whichever test asks first: `auto` remembers
    # its choice per thread count, and a module that runs on one thread would time it afresh.
    threads = torch.get_num_threads()
    torch.set_num_threads(PROCESS_THREADS)
    try:
        return load_model(str(embedded_checkpoint))
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def embedded_rewriter(embedded):
    from rewriter.decoding.rewrite import Rewriter

    return Rewriter(embedded)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, qwen_tokenizer):
    """A tiny random model with the real Qwen tokenizer and a short context, saved like any checkpoint."""
    path = tmp_path_factory.mktemp("tiny-qwen")
    model = tiny_model(vocab_size=QWEN_VOCAB, hidden=32, layers=1, eos_token_id=qwen_tokenizer.eos_token_id)
    model.config.max_position_embeddings = 256
    model.save_pretrained(path)
    qwen_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, qwen_tokenizer):
    """A tiny random Qwen2 with the real tokenizer, saved for the service tests."""
    from tests.helpers.service import save_tiny_qwen

    return save_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"), qwen_tokenizer)


@pytest.fixture(scope="module")
def tiny_loaded(tiny_dir):
    from rewriter.weights.models import load_model

    return load_model(str(tiny_dir), dtype="int8")  # pinned: auto picks by timing, the server must match
