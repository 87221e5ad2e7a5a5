"""The `rewriter` command: apply (rewrite a file), bench (measure decoding)."""
from __future__ import annotations

import argparse
import difflib
import os
import sys
import time

from .files import FileError, atomic_write, read_source
from .models import ModelError
from .prompt import NoCodeBlock, language_for


def _say(message: str) -> None:
    print(f"rewriter: {message}", file=sys.stderr, flush=True)


def _load_rewriter(args: argparse.Namespace):
    from .models import load_model
    from .rewrite import Rewriter

    started = time.perf_counter()
    loaded = load_model(args.model, device=args.device, progress=_say)
    _say(f"model ready in {time.perf_counter() - started:.1f}s")
    return Rewriter(loaded)


class _LiveStatus:
    """One status line on a terminal, rewritten in place while decoding runs."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.shown = False

    def update(self, stats) -> None:
        if not self.enabled:
            return
        line = (f"decoding: {stats.output_tokens} tokens, {stats.tokens_per_s:.1f} tok/s, "
                f"prediction {stats.accepted_prediction_tokens} accepted / "
                f"{stats.rejected_prediction_tokens} rejected")
        print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr, flush=True)


def colorize(diff: str) -> str:
    colors = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    lines = []
    for line in diff.splitlines(keepends=True):
        color = colors.get(line[:1]) if not line.startswith(("+++", "---")) else "\033[1m"
        lines.append(f"{color}{line.rstrip(chr(10))}\033[0m\n" if color else line)
    return "".join(lines)


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{name}", tofile=f"b/{name}",
    )
    # A last line without newline must still end the diff line, as diff(1) marks it.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def cmd_apply(args: argparse.Namespace) -> int:
    from .rewrite import Progress, RewriteError

    if not args.instruction or not args.instruction.strip():
        _say("the instruction is empty: say what to change with -i")
        return 2
    source = read_source(args.file)
    rewriter = _load_rewriter(args)
    status = _LiveStatus(sys.stderr.isatty() and not args.quiet)
    try:
        for event in rewriter.stream(source.text, args.instruction, language_for(source.path),
                                     max_new_tokens=args.max_new_tokens):
            if isinstance(event, Progress):
                status.update(event.stats)
            else:
                result = event
    except RewriteError as error:
        status.close()
        _say(f"{source.path}: {error}")
        return 2
    except NoCodeBlock as error:
        status.close()
        _say(f"{source.path}: {error}; nothing changed")
        return 1
    status.close()
    diff = unified_diff(source.text, result.text, str(args.file))
    if diff:
        sys.stdout.write(colorize(diff) if sys.stdout.isatty() else diff)
    stats = result.stats
    _say(f"{stats.output_tokens} tokens in {stats.total_s:.1f}s ({stats.tokens_per_s:.1f} tok/s), "
         f"{stats.forward_passes} forward passes, prediction tokens {stats.accepted_prediction_tokens} "
         f"accepted / {stats.rejected_prediction_tokens} rejected, time to first token {stats.ttft_s:.2f}s"
         + (", stopped at the token limit" if stats.finish_reason == "length" else ""))
    if not diff:
        _say("no changes")
    elif args.write:
        atomic_write(source, result.text)
        _say(f"wrote {source.path}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import load_cases, run_bench

    cases = load_cases(args.cases)
    rewriter = _load_rewriter(args)
    if args.max_file_tokens:
        cases = [c for c in cases if len(rewriter.tokenizer.encode(c.before)) <= args.max_file_tokens]
    if args.limit:
        cases = cases[: args.limit]
    if not cases:
        _say("no cases selected")
        return 2
    _say(f"{len(cases)} cases, each decoded three ways: plain greedy, prompt lookup, ours")
    run_bench(rewriter, cases, args.max_new_tokens, args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewriter", description="Rewrite code with a local model, fast.")
    commands = parser.add_subparsers(dest="command", required=True)

    def model_options(command: argparse.ArgumentParser) -> None:
        command.add_argument("--model", help="transformers path or hub id, or a .gguf file (default: the embedded Qwen2.5-Coder-0.5B-Instruct)")
        command.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda when present)")

    apply = commands.add_parser("apply", help="rewrite a file and show the diff")
    apply.add_argument("file")
    apply.add_argument("-i", "--instruction", required=True, help="what to change")
    apply.add_argument("--write", action="store_true", help="write the result to the file (atomically)")
    apply.add_argument("--max-new-tokens", type=int, help="cap on the answer's tokens")
    apply.add_argument("-q", "--quiet", action="store_true", help="no live progress line")
    model_options(apply)
    apply.set_defaults(run=cmd_apply)

    bench = commands.add_parser("bench", help="compare with plain greedy decoding and prompt lookup")
    bench.add_argument("cases", help="JSONL file of cases (id, language, before, instruction)")
    bench.add_argument("--limit", type=int, help="at most this many cases")
    bench.add_argument("--max-file-tokens", type=int, help="only cases whose file is at most this many tokens")
    bench.add_argument("--max-new-tokens", type=int, help="cap on each answer's tokens")
    bench.add_argument("--json", help="write the report here")
    model_options(bench)
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (FileError, ModelError, ValueError) as error:
        _say(str(error))
        return 2
    except KeyboardInterrupt:
        _say("interrupted; nothing was written")
        return 130


if __name__ == "__main__":
    sys.exit(main())
