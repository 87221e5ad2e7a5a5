"""A scripted engine for the language-server tests: answers from a JSON script, not a model.

`scripted_env(path)` is the environment that makes a language server (or an editor that starts
one) load it through REWRITER_ENGINE_FACTORY; the server then answers every rewrite from the
script, deterministically and at a chosen pace:

    {"delay_s": 0.02, "chunk_chars": 8, "concurrent": false, "load_s": 0,
     "rules": [{"instruction": "Add docstrings", "replace": [["old text", "new text"]]},
               {"instruction": "Explode", "error": "the model refused"}]}

A rule applies when its `instruction` occurs in the request's instruction (the first such rule
wins); its replacements are applied to the code in order; a rule may set its own `delay_s` and
`chunk_chars`. The answer is the edited code in one
fenced block, streamed `chunk_chars` characters at a time, `delay_s` apart. "Tokens" in the
stats are characters: accepted while the answer still equals the prediction, rejected after;
`max_new_tokens` (the `maxNewTokens` option) cuts the answer there, as a model's limit would.
`load_s` > 0 makes the first rewrite wait that long for a "model" to load, reporting as it goes;
a second load begun while one runs fails, as it must never happen.
A rule's `branches`, lists of replacements each, are the engine's other candidates (the local
model's branches where it hesitated: `Rewriter.branches`), in order; `"branches": false` at the
top makes an engine without branches (an endpoint's).

Next-edit prompts (Engine.complete, lsp/next_edits.py) are answered from `next_edits`: the first
rule whose `when` occurs in the prompt (its messages' text, or its raw text) applies its `replace`
pairs to the prediction, streamed as rewrites are; no rule, the prediction unchanged. Each chunk
is a "pass", `delay_s` long: `stopped` is asked before each, as the model's decoding asks.
With `prefill_log` (a path) set, the engine computes prompts ahead as the local model does
(`prefill_prompt`), writing each prompt's stable part there, one JSON string a line.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rewriter.answer import extract_code
from rewriter.engine import require_instruction
from rewriter.prompt import SourceText, build_prompt
from rewriter.results import Completion, Progress, RewriteError, RewriteResult, Stats


class ScriptedEngine:
    def __init__(self, rules: list[dict], delay_s: float = 0.0, chunk_chars: int = 8, concurrent: bool = False,
                 load_s: float = 0.0, next_edits: list[dict] | None = None, prefill_log: str | None = None):
        self.rules = rules
        self.next_edits = next_edits or []
        if prefill_log is not None:
            self.prefill_log = Path(prefill_log)
        self.delay_s = delay_s
        self.chunk_chars = max(1, chunk_chars)
        self.concurrent = concurrent
        self.load_s = load_s
        self.ready = load_s <= 0
        self.loading = False

    @classmethod
    def from_file(cls, path: str) -> ScriptedEngine:
        script = json.loads(Path(path).read_text())
        kind = BranchingScriptedEngine if script.get("branches", True) else cls
        return kind(script.get("rules", []), script.get("delay_s", 0.0), script.get("chunk_chars", 8),
                    script.get("concurrent", False), script.get("load_s", 0.0), script.get("next_edits"),
                    script.get("prefill_log"))

    def load(self, say) -> None:
        """Like EmbeddedEngine's: a slow first load, with progress."""
        if self.ready:
            return
        if self.loading:  # a model loaded twice at once: twice the memory, and a race
            raise RuntimeError("the engine is already loading")
        self.loading = True
        steps = 10
        for step in range(steps):
            time.sleep(self.load_s / steps)
            say(f"loading weights {10 * (step + 1)}%")
        self.ready = True

    def close(self) -> None:
        pass

    def rule(self, request) -> dict:
        require_instruction(request.instruction)
        rule = next((r for r in self.rules if r.get("instruction", "") in request.instruction), {})
        if "error" in rule:
            raise RewriteError(rule["error"])
        return rule

    def stream(self, request):
        rule = self.rule(request)
        sampled = request.sampling is not None and not request.sampling.greedy and "sampled" in rule
        yield from self.answer(request, rule, rule["sampled"] if sampled else rule.get("replace", []))

    def answer(self, request, rule: dict, replacements: list):
        """The answer with `replacements` applied to the code, streamed at the rule's pace."""
        text, instruction, language, context, max_new_tokens = (
            request.code, request.instruction, request.language, request.context, request.max_new_tokens)
        source = SourceText.from_text(text)
        code = source.code
        for old, new in replacements:
            code = code.replace(old, new)
        prediction = build_prompt(source.code, instruction, language, context).prediction + "\n"
        answer = build_prompt(code, instruction, language, context).prediction + "\n"
        cut = max_new_tokens is not None and len(answer) > max_new_tokens
        if cut:
            answer = answer[:max_new_tokens]
        stats = Stats()
        started = time.perf_counter()
        matching = True
        delay_s = rule.get("delay_s", self.delay_s)
        chunk_chars = max(1, rule.get("chunk_chars", self.chunk_chars))
        for at in range(0, len(answer), chunk_chars):
            if delay_s:
                time.sleep(delay_s)
            chunk = answer[at: at + chunk_chars]
            matching = matching and prediction.startswith(answer[: at + len(chunk)])
            stats.output_tokens += len(chunk)
            if matching:
                stats.accepted_prediction_tokens += len(chunk)
            else:
                stats.rejected_prediction_tokens += len(chunk)
            stats.forward_passes += 1
            stats.total_s = time.perf_counter() - started
            yield Progress(chunk, stats)
        stats.finish_reason = "length" if cut else "stop"
        yield RewriteResult(text=source.restore(extract_code(answer)), answer=answer, stats=stats)


    def complete_prompt(self, prompt, max_new_tokens=None, stopped=lambda: False) -> Completion:
        """A next-edit prompt's answer (see the module's docstring)."""
        asked = prompt.raw or "".join(message["content"] for message in prompt.messages or ())
        rule = next((r for r in self.next_edits if r.get("when", "") in asked), {})
        answer = prompt.prediction
        for old, new in rule.get("replace", []):
            answer = answer.replace(old, new)
        delay_s = rule.get("delay_s", self.delay_s)
        chunk_chars = max(1, rule.get("chunk_chars", self.chunk_chars))
        stats, written = Stats(finish_reason="stop"), ""
        for at in range(0, len(answer), chunk_chars):
            if stopped():
                return Completion(written, stats, stopped=True)
            if delay_s:
                time.sleep(delay_s)
            written += answer[at:at + chunk_chars]
            stats.output_tokens += 1
            stats.forward_passes += 1
        return Completion(written, stats)


    def __getattr__(self, name):
        if name == "prefill_prompt" and "prefill_log" in self.__dict__:
            return self._prefill_prompt
        raise AttributeError(name)

    def _prefill_prompt(self, prompt, stopped) -> int:
        """The stable part of a next-edit prompt, written to the log (see the module's docstring)."""
        content = prompt.raw if prompt.raw is not None else prompt.messages[-1]["content"]
        with self.prefill_log.open("a") as log:
            log.write(json.dumps(content[:prompt.stable_chars]) + "\n")
        return prompt.stable_chars or 0


class BranchingScriptedEngine(ScriptedEngine):
    def branches(self, request, count):
        """The rule's `branches`, up to `count`, each answered whole."""
        rule = self.rule(request)
        for replacements in rule.get("branches", [])[:count]:
            *_, result = self.answer(request, rule, replacements)
            yield result


SCRIPT_ENV = "REWRITER_LSP_TEST_SCRIPT"
ROOT = Path(__file__).resolve().parents[2]


def from_env() -> ScriptedEngine:
    """The engine factory a language server calls (REWRITER_ENGINE_FACTORY names it)."""
    return ScriptedEngine.from_file(os.environ[SCRIPT_ENV])


def scripted_env(script: Path | str) -> dict[str, str]:
    """Environment variables that make a language server answer from `script`."""
    return {"REWRITER_ENGINE_FACTORY": "tests.helpers.scripted:from_env", SCRIPT_ENV: str(script),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
