"""`rewriter bench CASES --endpoint [NAME=]URL ...`: the same cases against OpenAI-compatible servers.

Every server gets the same chat request (`RemoteRewriter`, protocol "openai": our prompt, the file
as `prediction`, temperature 0, the same token budget), so plain vLLM, vLLM with its n-gram
speculation or with our proposer, and `rewriter serve` are compared on equal terms. Each case is
sent to every endpoint in turn, so that noise on the machine hits all of them alike; one warm-up
request per endpoint comes first and is not counted. Before each request the bench waits a while
(`--settle`, 1 s): a server's threads may spin on for a moment after answering, taking cores from
the next server's request. No model is loaded here, and no torch.

The budget goes as `max_tokens`, the name every local server honours (llama-cpp-python ignores
`max_completion_tokens`). Per case and endpoint: output tokens (the server's `usage`; where a
server sends none, the answer counted with the model's tokenizer from the local cache, if it is
there), wall seconds of the whole request,
tokens/s (output tokens over those seconds, time to first token included, as the local bench
counts), time to first token, speculative tokens accepted and drafted, and whether the answer is
identical to the first endpoint's (the reference, normally plain greedy). Speculation figures come
from vLLM's Prometheus counters (GET {root}/metrics before and after the case) when the server
exposes them, else from `usage`'s accepted/rejected prediction tokens, else they are None.
"""
from __future__ import annotations

import glob
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ..answer import NoCodeBlock
from ..engine import EditRequest
from ..remote import RemoteRewriter, ServiceError
from ..results import Progress, RewriteError
from .cases import Case, run_cases

DEFAULT_MAX_NEW_TOKENS = 1024  # the local bench's 2 x prediction + 256 needs the tokenizer
WARM_UP = Case("warm-up", "python", "def warm_up():\n    return 1\n", "Add a docstring.")
WARM_UP_TOKENS = 64
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str


def parse_endpoints(specs: list[str]) -> list[Endpoint]:
    """`[NAME=]URL` each; a URL without a name is named by its host and path (without /v1)."""
    endpoints = []
    for spec in specs:
        name, equals, url = spec.partition("=")
        if not equals or "://" in name:  # no name: an "=" in the URL's query is not one
            name, url = "", spec
        if not name.strip():
            name = re.sub(r"^[a-z]+://", "", url.strip().rstrip("/")).removesuffix("/v1")
        endpoints.append(Endpoint(name.strip(), url.strip()))
    names = [endpoint.name for endpoint in endpoints]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"--endpoint: the name {', '.join(repeated)} is given twice; name them NAME=URL")
    return endpoints


def counters(text: str, names: tuple[str, ...] = (ACCEPTED, DRAFTED)) -> dict[str, float]:
    """The named counters in Prometheus' text format, summed over their label sets; absent ones left out."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = METRIC_NAME.match(line)
        if not match or match.group() not in names:
            continue
        rest = line[match.end():]
        if rest.startswith("{"):
            rest = rest[rest.rfind("}") + 1:]
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        found[match.group()] = found.get(match.group(), 0.0) + value
    return found


def scrape(engine: RemoteRewriter) -> dict[str, float]:
    """The speculation counters of the server behind `engine` ({} when it exposes none)."""
    root = engine.base_url.removesuffix("/v1")
    try:
        answer = engine.http.get(f"{root}/metrics", timeout=10.0)
    except httpx.HTTPError:
        return {}
    return counters(answer.text) if answer.status_code == 200 else {}


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> int | None:
    return round(after[name] - before[name]) if name in before and name in after else None


TokenCounter = Callable[[str], int]


def local_token_counter(model: str | None) -> TokenCounter | None:
    """The tokenizer of `model` (default: the embedded one) as prepared in the local cache, as a
    counter of an answer's tokens; None when it is not there. torch-free."""
    from tokenizers import Tokenizer

    from .. import EMBEDDED_NAME, cache_root

    name = model or EMBEDDED_NAME
    found = sorted((cache_root() / "models").glob(f"{glob.escape(name)}-*/tokenizer.json"))
    if not found:
        return None
    tokenizer = Tokenizer.from_file(str(found[-1]))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def decode(engine: RemoteRewriter, case: Case, max_new_tokens: int, count_tokens: TokenCounter | None = None) -> dict:
    """One request: the answer as streamed, the server's usage, times; `error` when it failed.
    `count_tokens` counts the answer where the server reports no usage."""
    answer, stats, error = "", None, None
    start = time.perf_counter()
    try:
        for event in engine.stream(EditRequest(case.before, case.instruction, case.language, None, max_new_tokens)):
            if isinstance(event, Progress):
                answer += event.text
            stats = event.stats  # one Stats object, filled in as the stream goes
    except NoCodeBlock:
        pass  # an answer without a code block is still timed and compared
    except (ServiceError, RewriteError, httpx.HTTPError) as failure:
        error = str(failure) or type(failure).__name__
    seconds = time.perf_counter() - start
    tokens = stats.output_tokens if stats and stats.output_tokens else None  # None: no usage reported
    counted = tokens is None and bool(answer) and count_tokens is not None
    if counted:
        assert count_tokens is not None
        tokens = count_tokens(answer)
    ttft = stats.ttft_s if stats and answer else None
    accepted = stats.accepted_prediction_tokens if stats else 0
    rejected = stats.rejected_prediction_tokens if stats else 0
    result = {
        "output_tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if tokens else None,
        "ttft_s": ttft,
        # After the first token: what speculation changes (the prefill before it is the same work).
        "decode_tokens_per_s": (tokens - 1) / (seconds - ttft) if tokens and tokens > 1 and ttft else None,
        "finish_reason": stats.finish_reason if stats else "",
        "accepted_prediction_tokens": accepted if accepted or rejected else None,
        "rejected_prediction_tokens": rejected if accepted or rejected else None,
        "answer": answer,
        "tokens_from": "tokenizer" if counted else "usage" if tokens else None,
    }
    return {**result, "error": error} if error else result


def measure_case(engines: dict[str, RemoteRewriter], case: Case, max_new_tokens: int,
                 count_tokens: TokenCounter | None = None, settle_s: float = 0.0) -> dict:
    """The case sent to every endpoint in turn, `settle_s` after the last request; answers compared
    with the first endpoint's."""
    results = {}
    for name, engine in engines.items():
        time.sleep(settle_s)
        before = scrape(engine)
        result = decode(engine, case, max_new_tokens, count_tokens)
        after = scrape(engine)
        result["metrics_accepted_tokens"] = _delta(before, after, ACCEPTED)
        result["metrics_draft_tokens"] = _delta(before, after, DRAFTED)
        if result["metrics_draft_tokens"] is not None:
            result["accepted_tokens"], result["drafted_tokens"] = (result["metrics_accepted_tokens"],
                                                                   result["metrics_draft_tokens"])
            result["speculation_from"] = "metrics"
        elif result["accepted_prediction_tokens"] is not None:
            result["accepted_tokens"] = result["accepted_prediction_tokens"]
            result["drafted_tokens"] = result["accepted_prediction_tokens"] + result["rejected_prediction_tokens"]
            result["speculation_from"] = "usage"
        else:
            result["accepted_tokens"] = result["drafted_tokens"] = result["speculation_from"] = None
        results[name] = result
    reference = results[next(iter(results))]
    for result in results.values():
        both = "error" not in result and "error" not in reference
        result["identical_to_reference"] = result["answer"] == reference["answer"] if both else None
    return {"id": case.id, "endpoints": results}


def _median(values: list) -> float | None:
    return statistics.median(values) if values else None


def summarize(rows: list[dict], names: list[str], max_new_tokens: int) -> dict:
    endpoints = {}
    for name in names:
        results = [row["endpoints"][name] for row in rows]
        answered = [result for result in results if "error" not in result]
        speculating = [result for result in answered if result["drafted_tokens"] is not None]
        accepted = sum(result["accepted_tokens"] for result in speculating)
        drafted = sum(result["drafted_tokens"] for result in speculating)
        endpoints[name] = {
            "cases": len(results),
            "errors": len(results) - len(answered),
            "median_tokens_per_s": _median([r["tokens_per_s"] for r in answered if r["tokens_per_s"] is not None]),
            "median_ttft_s": _median([r["ttft_s"] for r in answered if r["ttft_s"] is not None]),
            "median_decode_tokens_per_s": _median([r["decode_tokens_per_s"] for r in answered
                                                   if r["decode_tokens_per_s"] is not None]),
            "output_tokens": sum(r["output_tokens"] or 0 for r in answered),
            "accepted_tokens": accepted if speculating else None,
            "drafted_tokens": drafted if speculating else None,
            "acceptance_rate": accepted / drafted if drafted else None,
            "identical_to_reference": sum(r["identical_to_reference"] is True for r in answered),
            "cut_at_token_limit": sum(r["finish_reason"] == "length" for r in answered),
        }
    return {"cases": len(rows), "reference": names[0] if names else None, "max_new_tokens": max_new_tokens,
            "endpoints": endpoints, "median_tokens_per_s_ratio": _ratios(rows, names, "tokens_per_s"),
            "median_decode_tokens_per_s_ratio": _ratios(rows, names, "decode_tokens_per_s")}


def _ratios(rows: list[dict], names: list[str], key: str) -> dict[str, dict[str, float | None]]:
    """For each pair of endpoints, the median over cases of the one's `key` over the other's."""
    ratios: dict[str, dict[str, float | None]] = {}
    for name in names:
        ratios[name] = {}
        for other in names:
            if other == name:
                continue
            pairs = [(row["endpoints"][name].get(key), row["endpoints"][other].get(key)) for row in rows]
            ratios[name][other] = _median([mine / theirs for mine, theirs in pairs if mine and theirs])
    return ratios


def _cell(value, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


CASE_HEADER = "case | endpoint | out | s | tok/s | ttft s | acc/drafted | same"


def format_case(row: dict) -> str:
    lines = []
    for name, r in row["endpoints"].items():
        speculation = "-" if r["drafted_tokens"] is None else f"{r['accepted_tokens']}/{r['drafted_tokens']}"
        same = "error: " + r["error"][:120] if "error" in r else _cell(r["identical_to_reference"])
        counted = "*" if r.get("tokens_from") == "tokenizer" else ""  # the server sent no usage
        lines.append(" | ".join([row["id"].rsplit("/", 1)[-1], name, _cell(r["output_tokens"]) + counted,
                                 f"{r['seconds']:.2f}", _cell(r["tokens_per_s"], "{:.1f}"),
                                 _cell(r["ttft_s"], "{:.3f}"), speculation, same]))
    return "\n".join(lines)


def format_summary(summary: dict) -> str:
    names = list(summary["endpoints"])
    lines = [f"{summary['cases']} cases, at most {summary['max_new_tokens']} new tokens each, greedy; "
             f"'same': answers identical to {summary['reference']}'s; 'x NAME': median ratio of tokens/s "
             "(in brackets: of decoding tokens/s, after the first token); 'out' with *: counted with the "
             "model's tokenizer, as the server sent no usage",
             " | ".join(["endpoint", "tok/s", "decode tok/s", "ttft s", "accepted", "same", "cut", "errors",
                         *(f"x {name}" for name in names)])]
    for name, figures in summary["endpoints"].items():
        rate = figures["acceptance_rate"]
        accepted = "-"
        if figures["drafted_tokens"] is not None:
            accepted = f"{figures['accepted_tokens']}/{figures['drafted_tokens']}"
        if rate is not None:
            accepted += f" ({100 * rate:.0f}%)"
        ratios = summary["median_tokens_per_s_ratio"][name]
        decode_ratios = summary["median_decode_tokens_per_s_ratio"][name]
        lines.append(" | ".join([
            name, _cell(figures["median_tokens_per_s"], "{:.1f}"),
            _cell(figures["median_decode_tokens_per_s"], "{:.1f}"), _cell(figures["median_ttft_s"], "{:.3f}"),
            accepted, f"{figures['identical_to_reference']}/{figures['cases']}",
            str(figures["cut_at_token_limit"]), str(figures["errors"]),
            *("-" if other == name else f"{_cell(ratios[other], '{:.2f}')} ({_cell(decode_ratios[other], '{:.2f}')})"
              for other in names)]))
    return "\n".join(lines)


def run_endpoint_bench(endpoints: list[Endpoint], cases: list[Case], max_new_tokens: int | None,
                       json_path: str | None, model: str | None = None, out=sys.stdout,
                       say: Callable[[str], None] = lambda message: None, settle_s: float = 0.0) -> dict:
    """Warm up every endpoint, then measure the cases; raises ServiceError when one cannot be warmed up."""
    budget = max_new_tokens or DEFAULT_MAX_NEW_TOKENS
    count_tokens = local_token_counter(model)
    engines: dict[str, RemoteRewriter] = {}
    try:
        for endpoint in endpoints:
            engines[endpoint.name] = RemoteRewriter(endpoint.url, model=model, protocol="openai",
                                                    budget_field="max_tokens")
        for name, engine in engines.items():
            say(f"warming up {name} ({engine.base_url})")
            warm = decode(engine, WARM_UP, WARM_UP_TOKENS)
            if "error" in warm:
                raise ServiceError(f"endpoint {name} ({engine.base_url}): {warm['error']}")
        print(CASE_HEADER, file=out, flush=True)
        names = list(engines)
        return run_cases(cases, lambda case: measure_case(engines, case, budget, count_tokens, settle_s), format_case,
                         lambda rows: summarize(rows, names, budget), format_summary, json_path, out)
    finally:
        for engine in engines.values():
            engine.close()
