"""`rewriter bench`: the parsed options checked and the run they ask for started: servers
(`--endpoint`), edit quality (`--tests`), the integrity check (`--integrity`), the snippet merge
(`--snippets`: every reference edit in every snippet style, torch-free unless the model merges
too), the sampling modes, or speed. Torch-free when imported: `bench --endpoint` loads no model."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine import SamplingParams
from .cases import Case, load_cases, select

if TYPE_CHECKING:
    from ..decoding.rewrite import Rewriter
    from ..weights.models import LoadedModel
    from .snippet_cases import SnippetCase

Say = Callable[[str], None]
# The CLI's model loader: (options, prefix_cache) -> a Rewriter on --model, --device and --dtype.
LoadRewriter = Callable[..., "Rewriter"]


def bench_command(args: argparse.Namespace, params: SamplingParams, load: LoadRewriter, say: Say) -> int:
    """The exit code: 0 done, 1 a server failed, 2 options that do not go together or no cases."""
    if not _counts_fit(args, say):
        return 2
    sampling = params != SamplingParams() or bool(args.draft_model) or args.mjsd is not None
    if args.random_weights:
        return _random_weights_bench(args, sampling, say)
    if args.snippets:
        return _snippet_bench(args, load, sampling, say)
    if args.next_edit:
        return _next_edit_bench(args, load, sampling, say)
    if args.model_merge or args.model_only or args.styles or args.random_style:
        say("--model-merge, --model-only, --styles and --random-style measure the snippet merge: add --snippets")
        return 2
    if args.cases is None:
        say("name a JSONL file of cases (or measure the snippet merge with --snippets)")
        return 2
    cases = load_cases(args.cases)
    if args.endpoint:  # servers decode: no local model is loaded, nor torch
        cases = select(cases, args.every, args.limit)
        if not cases:
            say("no cases selected")
            return 2
        return _endpoint_bench(args, cases, sampling, say, args.json)[0]
    return _local_bench(args, cases, params, sampling, load, say)


def _counts_fit(args: argparse.Namespace, say: Say) -> bool:
    """Whether --every and --feedback are given as every run takes them; if not, says why."""
    if args.every is not None and args.every < 1:
        say("--every takes a whole number of at least 1")
        return False
    if args.feedback and not args.tests:
        say("--feedback is for --tests: a second try after the first answer's test output")
        return False
    if args.tries < 1 or (args.tries > 1 and not args.tests):
        say("--tries takes a whole number of at least 1, and more than 1 only with --tests")
        return False
    if (args.self_test or args.branches is not None) and not args.tests:
        say("--branches and --self-test decide each answer of --tests, as they decide `rewriter apply`'s")
        return False
    if args.branches is not None and args.branches < 0:
        say("--branches takes a number of branches, 0 or more")
        return False
    return True


def _random_weights_bench(args: argparse.Namespace, sampling: bool, say: Say) -> int:
    """Greedy decoding timed on random models at the named shapes."""
    from .random_weights import random_weights_bench

    if args.cases or args.snippets or args.endpoint or sampling or args.tests:
        say("--random-weights measures greedy decoding on random models: it takes no cases, servers, "
            "sampling or test options")
        return 2
    return random_weights_bench(args.random_weights.split(","), args.device, args.prompt_tokens,
                                args.max_new_tokens or 512, args.reps, args.json, say)


def _local_bench(args: argparse.Namespace, cases: list[Case], params: SamplingParams, sampling: bool,
                 load: LoadRewriter, say: Say) -> int:
    """The cases decoded by a model loaded here: edit quality, the integrity check, sampling or speed."""
    if args.compare and not args.tests:
        say("--compare is for --tests: each model and path's edits judged by the cases' tests")
        return 2
    if args.tests:
        if sampling:
            say("--tests measures greedy decoding; leave out the sampling and draft-model options")
            return 2
        cases = _with_tests(cases, say)
    rewriter = load(args, prefix_cache=args.integrity)  # functions of one file share a prefix
    if args.max_file_tokens:
        cases = [c for c in cases if len(rewriter.tokenizer.encode(c.before)) <= args.max_file_tokens]
    cases = select(cases, args.every, args.limit)
    if not cases:
        say("no cases selected")
        return 2
    if args.integrity:
        from .integrity_bench import run_integrity_bench

        say(f"integrity: up to {args.spans} functions of {len(cases)} files, each rewritten on its own")
        run_integrity_bench(rewriter, cases, args.spans, args.max_new_tokens, args.json, say=say)
        return 0
    if args.tests:
        return _tests_bench(args, rewriter, cases, load, say)
    if sampling:
        return _sampling_bench(args, rewriter, cases, params, say)
    return _speed_bench(args, rewriter, cases, say)


def _with_tests(cases: list[Case], say: Say) -> list[Case]:
    """The cases that have tests; says how many were left out."""
    with_tests = [case for case in cases if case.tests]
    if len(with_tests) < len(cases):
        say(f"{len(cases) - len(with_tests)} cases without tests left out")
    return with_tests


def _snippet_bench(args: argparse.Namespace, load: LoadRewriter, sampling: bool, say: Say) -> int:
    """The deterministic merge on every reference edit cut in every snippet style (torch-free); with
    --random-style, --model-merge, --model-only or --endpoint, on one snippet per edit in a style
    picked at random, then, when asked, the model's merges, or servers' merges instead."""
    one_style = args.random_style or args.model_only or bool(args.endpoint)
    others = [flag for flag, given in (("--tests", args.tests), ("--integrity", args.integrity),
                                       ("--compare", args.compare)) if given]
    if args.endpoint and args.model_merge:
        others.append("--model-merge (servers merge every case: the model alone)")
    if args.styles and one_style:
        others.append("--styles (for the report of every style; the one-style cases pick theirs at random)")
    if others:
        say(f"{', '.join(others)}: not for --snippets")
        return 2
    paths = _reference_edit_paths(args, say)
    if paths is None:
        return 2
    if one_style:
        return _one_style_snippet_bench(args, paths, load, sampling, say)
    return _snippet_styles_bench(args, paths, load, say)


def _next_edit_bench(args: argparse.Namespace, load: LoadRewriter, sampling: bool, say: Say) -> int:
    """Next-edit cases cut from the reference edits, suggested through the product's own path."""
    from ..next_edit.formats import FORMATS, choose_format
    from .next_edit_bench import run_next_edit_bench
    from .next_edit_cases import make_cases

    if sampling or args.endpoint or args.tests or args.integrity:
        say("--next-edit measures greedy suggestions on a local model: no sampling, --endpoint, --tests or --integrity")
        return 2
    if args.next_edit_format and args.next_edit_format not in FORMATS:
        say(f"--next-edit-format: expected one of {', '.join(sorted(FORMATS))}, got {args.next_edit_format!r}")
        return 2
    paths = _reference_edit_paths(args, say)
    if paths is None:
        return 2
    cases = select(make_cases(paths), args.every, args.limit)
    if not cases:
        say("no cases selected")
        return 2
    rewriter = load(args, prefix_cache=True)  # "with the prefix computed ahead" needs it
    fmt = choose_format(args.next_edit_format or "auto", rewriter.loaded.name)  # as the language server picks it
    say(f"{len(cases)} next-edit cases ({sum(case.no_op for case in cases)} no-op) from "
        f"{', '.join(str(path) for path in paths)}, on {rewriter.loaded.name} ({rewriter.loaded.dtype}) in the "
        f"{fmt.name} format")
    run_next_edit_bench(rewriter, cases, fmt, args.json, sys.stdout)
    return 0


def _reference_edit_paths(args: argparse.Namespace, say: Say) -> list[Path] | None:
    """The reference edits --cases names, else those reference_edit_paths finds; None, said why, where none are."""
    from .snippet_cases import NoReferenceEdits, reference_edit_paths

    try:
        return reference_edit_paths([args.cases] if args.cases else None)
    except NoReferenceEdits as error:
        say(str(error))
        return None


def _snippet_styles_bench(args: argparse.Namespace, paths: list[Path], load: LoadRewriter, say: Say) -> int:
    """Each reference edit cut in each style (snippet_styles.py), each style reported apart; with
    --model-merge, the model then merges what the deterministic merges left to it."""
    from .snippet_cases import load_reference_edits
    from .snippet_style_bench import format_style_report, parse_styles, pass_judge, style_bench
    from .snippet_styles import style_cases

    try:
        styles = parse_styles(args.styles)
    except ValueError as error:
        say(str(error))
        return 2
    rows = select(load_reference_edits(paths), args.every, args.limit)
    if not rows:
        say("no cases selected")
        return 2
    say(f"{len(rows)} reference edits ({', '.join(str(path) for path in paths)}), each cut in {len(styles)} "
        f"snippet styles and merged without a model; tests run on inexact merges ({args.test_timeout:g}s limit)")
    judge = pass_judge(rows, args.test_timeout)
    report = style_bench(rows, styles, args.test_timeout, say, judge)
    print(format_style_report(report), flush=True)
    if args.model_merge:
        from .snippet_model import format_model_report, run_model_merges

        by_key = {(case.id, case.style): case for case in style_cases(rows, styles)}
        cases = [by_key[row["id"], row["style"]] for row in report["cases"]]  # the report's rows go style by style
        say("the model merges the cases the deterministic merges leave to it, as `rewriter apply --snippet` does")
        report["model"] = run_model_merges(load(args), cases, report["cases"], every_case=False,
                                           max_new_tokens=args.max_new_tokens, say=say, judge=judge)
        print(format_model_report(report["model"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _one_style_snippet_bench(args: argparse.Namespace, paths: list[Path], load: LoadRewriter, sampling: bool,
                             say: Say) -> int:
    """One snippet per reference edit in a style picked at random (snippet_cases.py), merged without a
    model, then by the model where asked; with --endpoint, servers' merges instead."""
    from .snippet_cases import format_report, make_cases, run_snippet_bench

    cases = select(make_cases(paths), args.every, args.limit)
    if not cases:
        say("no cases selected")
        return 2
    if args.endpoint:  # servers merge every case, as the model alone; no local model, nor torch
        return _snippet_endpoint_bench(args, cases, sampling, say)
    report = run_snippet_bench(cases)
    print(format_report(report), flush=True)
    if args.model_merge or args.model_only:
        from .snippet_model import format_model_report, run_model_merges

        which = "every case" if args.model_only else "the cases the merge leaves to the model"
        say(f"the model merges {which}, as `rewriter apply --snippet` does")
        report["model"] = run_model_merges(load(args), cases, report["cases"], every_case=args.model_only,
                                           max_new_tokens=args.max_new_tokens, say=say)
        print(format_model_report(report["model"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _snippet_endpoint_bench(args: argparse.Namespace, cases: list[SnippetCase], sampling: bool, say: Say) -> int:
    """Servers merge every selected snippet case, timed side by side; then each one's exact merges."""
    from .snippet_endpoints import exact_merges, format_exact_merges, merge_requests

    code, report = _endpoint_bench(args, merge_requests(cases), sampling, say, json_path=None)
    if report is None:
        return code
    report["exact_merges"] = exact_merges(report, cases)
    print(format_exact_merges(report["exact_merges"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _endpoint_bench(args: argparse.Namespace, cases: list[Case], sampling: bool, say: Say,
                    json_path: str | None) -> tuple[int, dict | None]:
    """The exit code and the servers' report (None where options do not go with servers, 2, or a
    server failed, 1). The cases are measured as given: the caller selected them."""
    from ..remote import ServiceError
    from .endpoint_bench import DEFAULT_MAX_NEW_TOKENS, parse_endpoints, run_endpoint_bench

    local = [flag for flag, given in (
        ("--tests", args.tests), ("--integrity", args.integrity), ("--baselines", args.baselines),
        ("--max-file-tokens", args.max_file_tokens), ("--no-float32-reference", args.no_float32_reference),
        ("--device", args.device), ("--dtype", args.dtype != "auto"),
        ("the sampling and draft-model options", sampling)) if given]
    if local:
        say(f"{', '.join(local)}: for a local model; --endpoint measures servers, decoding greedily")
        return 2, None
    if args.settle < 0:
        say("--settle takes a number of seconds, 0 or more")
        return 2, None
    endpoints = parse_endpoints(args.endpoint)
    say(f"{len(cases)} cases, each sent to {', '.join(e.name for e in endpoints)} in turn (greedy, at most "
        f"{args.max_new_tokens or DEFAULT_MAX_NEW_TOKENS} new tokens); the reference: {endpoints[0].name}")
    try:
        return 0, run_endpoint_bench(endpoints, cases, args.max_new_tokens, json_path, model=args.model, say=say,
                                     settle_s=args.settle)
    except ServiceError as error:
        say(str(error))
        return 1, None


def _speed_bench(args: argparse.Namespace, rewriter: Rewriter, cases: list[Case], say: Say) -> int:
    from ..engine_factory import EngineSettings, load_rewriter
    from .bench import run_bench

    reference = None
    if rewriter.loaded.dtype != "float32" and not args.no_float32_reference:
        reference = load_rewriter(EngineSettings(model=args.model, device=args.device, dtype="float32"), say)
    pass_costs = None
    if rewriter.loaded.device.type == "cpu":
        pass_costs = _candidate_pass_costs(reference or rewriter, rewriter.loaded.dtype, say)
    ways = "plain greedy, prompt lookup, ours" + (", and plain float32 greedy as the reference" if reference else "")
    say(f"{len(cases)} cases in {rewriter.loaded.dtype}, each decoded: {ways}")
    run_bench(rewriter, cases, args.max_new_tokens, args.json, float32_reference=reference, pass_costs=pass_costs)
    return 0


def _candidate_pass_costs(float32_rewriter: Rewriter, dtype: str, say: Say) -> dict | None:
    """Each CPU path's pass costs, timed on a float32 model, and what `auto` picks from them."""
    from ..weights.cpu_choice import choose, describe
    from ..weights.path_timing import measure_candidates

    if float32_rewriter.loaded.dtype != "float32":
        return None  # no float32 model in this run (--no-float32-reference) to time the others on
    costs = measure_candidates(float32_rewriter.loaded.model, say=say)
    chosen = choose(costs)
    say(f"candidates timed for this run; {describe(chosen, costs).replace('dtype auto: ', 'auto would pick ')}; "
        f"this run decodes in {dtype}")
    return {"auto_choice": chosen, "ms": {name: {str(w): 1000 * t for w, t in measured.items()}
                                          for name, measured in costs.items()}}


def _tests_bench(args: argparse.Namespace, rewriter: Rewriter, cases: list[Case], load: LoadRewriter,
                 say: Say) -> int:
    from ..cli_arguments import edit_options
    from .bench import integrity_refusal, run_tests_bench

    options = edit_options(args)  # what `rewriter apply` would run with the same flags
    ways = "plain greedy, prompt lookup and ours" if args.baselines else "ours only (--baselines adds the others)"
    runs = [(args.model, args.dtype), *(args.compare or [])]
    reports = []
    for index, (model, dtype) in enumerate(runs):
        if index:
            rewriter = load(argparse.Namespace(**{**vars(args), "model": model, "dtype": dtype}))
        name = model or rewriter.loaded.name
        say(f"{len(cases)} cases on {name} in {rewriter.loaded.dtype}, decoded by {ways}; "
            f"each file rewritten as `rewriter apply` rewrites it ({options.describe()}); "
            f"tests run on each edit ({args.test_timeout:g}s limit)"
            + ("; a second try after feedback where the first did not pass" if args.feedback else "")
            + (f"; up to {args.tries} tries as `apply --test --tries {args.tries}`" if args.tries > 1 else ""))
        report = run_tests_bench(rewriter, cases, options, None if args.compare else args.json,
                                 baselines=args.baselines, refusal=integrity_refusal, timeout_s=args.test_timeout,
                                 feedback=args.feedback, tries=args.tries)
        reports.append({"model": name, **report})
    if args.compare:
        from .summary import cascade, format_cascade, format_tests_side_by_side

        chain = cascade(reports)
        print(format_cascade(chain), flush=True)
        print(format_tests_side_by_side(reports), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"runs": reports, "cascade": chain}, indent=2) + "\n",
                                       encoding="utf-8")
    return 0


def _sampling_bench(args: argparse.Namespace, rewriter: Rewriter, cases: list[Case], params: SamplingParams,
                    say: Say) -> int:
    from .sampling_bench import run_sampling_bench

    draft = _draft_model(args, rewriter, say) if args.draft_model else None
    if args.mjsd is not None:
        from ..decoding.mjsd import WARNING

        say(f"warning: MJSD is measured too. {WARNING}")
    say(f"{len(cases)} cases in sampling modes: plain decoding, token vs block verification, "
        "prediction vs draft model vs both, MJSD vs greedy (as the flags ask)")
    run_sampling_bench(rewriter, cases, args.max_new_tokens, params, draft, args.mjsd, args.json)
    return 0


def _draft_model(args: argparse.Namespace, rewriter: Rewriter, say: Say) -> LoadedModel:
    """The --draft-model, loaded as the target is; it must share the target's tokenizer."""
    from drafters.draft_model import check_same_tokenizer

    from ..engine_factory import EngineSettings, load_draft_model

    draft = load_draft_model(EngineSettings(device=args.device, dtype=args.dtype, draft_model=args.draft_model), say)
    assert draft is not None  # the settings name one
    check_same_tokenizer(rewriter.tokenizer, draft.tokenizer)
    return draft
