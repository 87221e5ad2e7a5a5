"""The language server computes the prompt of the document worked on before a rewrite is asked
for (lsp/prefill_ahead.py): the rewrite starts from that cache and gives what a cold one gives."""
from __future__ import annotations

import asyncio

import pytest

from tests.helpers.lsp import VSCODE, Editor

pytestmark = pytest.mark.asyncio

FILE = "".join(f"def step_{n}(value):\n    return value * {n} + {n * 7}\n\n\n" for n in range(60))
TARGET = {"start": {"line": 8, "character": 0}, "end": {"line": 10, "character": 0}}  # step_2
OTHER = "def lonely():\n    return 1\n"


async def rewrite_after_idle(tmp_path, prefill_ahead: bool) -> dict:
    """A rewrite of step_2 in FILE, asked after the file was open and idle for a while, on a server
    whose model was loaded by an earlier rewrite in another file."""
    options = {"engine": {"model": str(tmp_path.parent / "model"), "dtype": "int8"}, "contextChars": 100_000,
               "maxNewTokens": 24, "prefillAhead": prefill_ahead}
    editor = await Editor.start(VSCODE, None, tmp_path, options)
    try:
        other, uri = (tmp_path / "other.py").as_uri(), (tmp_path / "steps.py").as_uri()
        editor.open(other, OTHER)
        await editor.execute("rewriter.rewriteFile", {"uri": other, "instruction": "Rename lonely to alone."})
        editor.open(uri, FILE)
        await editor.code_actions(uri, (8, 0), (10, 0))  # as an editor asks when the cursor moves
        await asyncio.sleep(3)  # idle: the prefill of the tiny model takes well under a second
        outcome = await editor.execute("rewriter.rewrite", {"uri": uri, "range": TARGET,
                                                             "instruction": "Rename step_2 to double_step."})
        return {**outcome, "text": editor.text(uri)}
    finally:
        await editor.stop()


async def test_a_rewrite_after_an_idle_document_starts_from_the_kept_cache(tmp_path_factory, qwen_tokenizer):
    from tests.helpers.service import save_tiny_qwen

    root = tmp_path_factory.mktemp("prefill")
    save_tiny_qwen(root / "model", qwen_tokenizer)
    warm_dir, cold_dir = root / "warm", root / "cold"
    warm_dir.mkdir()
    cold_dir.mkdir()
    warm = await rewrite_after_idle(warm_dir, prefill_ahead=True)
    cold = await rewrite_after_idle(cold_dir, prefill_ahead=False)
    # The whole file goes before the code: far more than the system message was computed ahead.
    assert warm["stats"]["cached_prompt_tokens"] > 500 > cold["stats"]["cached_prompt_tokens"]
    # The same answer: its length, how it ended and what it did to the file (the tokens themselves are
    # compared in tests/decoding/test_prefill.py; the passes they took vary with the window policy's timing).
    assert warm["stats"]["output_tokens"] == cold["stats"]["output_tokens"] > 0
    assert warm["stats"]["finish_reason"] == cold["stats"]["finish_reason"]
    assert (warm["status"], warm["message"].split(" (")[0], warm["text"]) == (
        cold["status"], cold["message"].split(" (")[0], cold["text"])
