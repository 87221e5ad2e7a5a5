"""`rewriter bench CASES` with sampling or draft-model options: the sampling modes side by side.

Separate from the greedy comparison (bench.py): token vs block verification under sampling,
prediction vs draft model vs both, and MJSD (which changes the output) against greedy.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from ..decoding.rewrite import Rewriter
from ..prompt import SourceText
from .bench import warm_up
from .cases import Case
from .summary import summarize_sampling


class _CountingDrafter:
    """Counts verified drafts and accepted tokens for the mean accepted length."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.drafts = 0
        self.accepted = 0

    def propose(self, tokens, prompt_length, limit):
        return self.inner.propose(tokens, prompt_length, limit)

    def feedback(self, draft, accepted):
        self.drafts += 1
        self.accepted += accepted
        self.inner.feedback(draft, accepted)


def _decode_mode(rewriter: Rewriter, prompt_ids: list[int], budget: int, drafter, verifier) -> dict:
    counting = _CountingDrafter(drafter) if drafter is not None else None
    tokens: list[int] = []
    start = time.perf_counter()
    for step in rewriter.decoder.generate(prompt_ids, counting, budget, rewriter.stop, verifier=verifier):
        tokens.extend(step.tokens)
        stats = step.stats
    seconds = time.perf_counter() - start
    return {
        "tokens": tokens, "output_tokens": len(tokens), "seconds": seconds,
        "tokens_per_s": len(tokens) / seconds, "forward_passes": stats.forward_passes,
        "drafts_verified": counting.drafts if counting else 0,
        "mean_accepted_length": counting.accepted / counting.drafts if counting and counting.drafts else 0.0,
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "accepted_draft_tokens": stats.accepted_draft_tokens,
    }


def perplexity(rewriter: Rewriter, prompt_ids: list[int], output: list[int]) -> float:
    """exp(mean negative log-likelihood) of `output` after the prompt, under the target model."""
    model = rewriter.loaded.model
    ids = torch.tensor([prompt_ids + output], device=rewriter.loaded.device)
    with torch.inference_mode():
        logits = model(input_ids=ids, logits_to_keep=len(output) + 1).logits[0, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(output, device=logits.device)[:, None])
    return float(torch.exp(-logp.mean()))


def run_sampling_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None, params,
                      draft=None, mjsd_tau: float | None = None) -> dict:
    """One case decoded in each sampling mode that the settings ask for."""
    from dataclasses import replace

    from drafters.draft_model import PredictionThenModelDrafter

    from ..decoding.sampling import make_verifier, model_drafter

    code = SourceText.from_text(case.before).code
    prompt_ids, prediction, budget = rewriter.plan(code, case.instruction, case.language, None, max_new_tokens)
    modes: dict[str, dict] = {}

    def verifier(kind: str | None = None):
        return make_verifier(replace(params, verification=kind) if kind else params)

    modes["plain"] = _decode_mode(rewriter, prompt_ids, budget, None, verifier())
    if not params.greedy:
        for verification in ("token", "block"):
            modes[f"prediction/{verification}"] = _decode_mode(rewriter, prompt_ids, budget,
                                                              rewriter.drafter(prediction), verifier(verification))
    if draft is not None:
        def small():
            return model_drafter(rewriter, draft, params)

        kinds = ("token", "block") if not params.greedy else (None,)
        for kind in kinds:
            suffix = f"/{kind}" if kind else ""
            if params.greedy:
                modes["prediction"] = _decode_mode(rewriter, prompt_ids, budget, rewriter.drafter(prediction),
                                                   verifier())
            modes[f"draft_model{suffix}"] = _decode_mode(rewriter, prompt_ids, budget, small(), verifier(kind))
            modes[f"both{suffix}"] = _decode_mode(
                rewriter, prompt_ids, budget, PredictionThenModelDrafter(rewriter.drafter(prediction), small()),
                verifier(kind))
    if mjsd_tau is not None and draft is not None:
        from ..decoding.mjsd import MJSDVerifier

        if params.greedy:
            greedy = modes["plain"]
        else:
            greedy = modes["greedy"] = _decode_mode(rewriter, prompt_ids, budget, None, None)
        mjsd = _decode_mode(rewriter, prompt_ids, budget,
                            PredictionThenModelDrafter(rewriter.drafter(prediction),
                                                       model_drafter(rewriter, draft, params, beam=True)),
                            MJSDVerifier(mjsd_tau))
        modes["mjsd"] = mjsd
        mjsd["perplexity"] = perplexity(rewriter, prompt_ids, mjsd["tokens"])
        greedy["perplexity"] = perplexity(rewriter, prompt_ids, greedy["tokens"])
        mjsd["identical_to_greedy"] = mjsd["tokens"] == greedy["tokens"]
    plain_rate = modes["plain"]["tokens_per_s"]
    for result in modes.values():
        result["speedup_vs_plain"] = result["tokens_per_s"] / plain_rate
        del result["tokens"]
    return {"id": case.id, "prompt_tokens": len(prompt_ids), "prediction_tokens": len(prediction), "modes": modes}


def run_sampling_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, params,
                       draft=None, mjsd_tau: float | None = None, json_path: str | None = None,
                       out=sys.stdout) -> dict:
    warm_up(rewriter)
    rows = []
    for case in cases:
        row = run_sampling_case(rewriter, case, max_new_tokens, params, draft, mjsd_tau)
        rows.append(row)
        for name, result in row["modes"].items():
            extra = f", perplexity {result['perplexity']:.3f}" if "perplexity" in result else ""
            print(f"{case.id.rsplit('/', 1)[-1]} {name}: {result['output_tokens']} tokens, "
                  f"{result['tokens_per_s']:.2f} tok/s ({result['speedup_vs_plain']:.2f}x plain), "
                  f"mean accepted {result['mean_accepted_length']:.2f} over {result['drafts_verified']} drafts, "
                  f"{result['forward_passes']} passes{extra}", file=out, flush=True)
        if json_path:
            Path(json_path).write_text(json.dumps({"cases": rows}, indent=2) + "\n", encoding="utf-8")
    summary = summarize_sampling(rows)
    print("medians: " + json.dumps(summary, indent=1), file=out, flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n", encoding="utf-8")
    return {"summary": summary, "cases": rows}
