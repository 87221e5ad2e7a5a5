"""The `rewriter` command: apply (rewrite files), bench (measure decoding), serve (HTTP), lsp (editors).

This module runs each subcommand; their options are in cli_arguments.py."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

from . import package_version
from .apply.files import FileError
from .cli_arguments import (
    Parser,
    UsageError,
    add_apply,
    add_bench,
    add_doctor,
    add_lsp,
    add_serve,
    add_vllm,
)
from .results import ModelError


def _say(message: str) -> None:
    print(f"rewriter: {message}", file=sys.stderr, flush=True)


def _progress(args: argparse.Namespace):
    """Where model-loading lines go: stderr, or nowhere under -q (with transformers' bars hidden)."""
    if not getattr(args, "quiet", False):
        return _say
    from .weights.models import hide_progress_bars

    hide_progress_bars()
    return lambda message: None


def _local_settings(args: argparse.Namespace, **more):
    """The settings of the model in this process, as --model, --device and --dtype name it."""
    from .engine_factory import EngineSettings

    return EngineSettings(model=args.model, device=args.device, dtype=args.dtype, **more)


def _load_local(args: argparse.Namespace, settings):
    """The model in this process that `settings` name, loaded now, saying how long the load took."""
    from .engine_factory import load_rewriter

    started = time.perf_counter()
    say = _progress(args)
    rewriter = load_rewriter(settings, say)
    say(f"model ready ({rewriter.dtype}) in {time.perf_counter() - started:.1f}s")
    return rewriter


def _load_rewriter(args: argparse.Namespace, prefix_cache: bool = False):
    """The bench's model, decoding as each of its measurements asks."""
    return _load_local(args, _local_settings(args, prefix_cache=prefix_cache))


def cmd_apply(args: argparse.Namespace) -> int:
    from .apply.batch import apply_command
    from .apply.plans import BatchError, Options
    from .cli_arguments import edit_options
    from .edits.target import parse_line_range

    if args.instruction is None and args.snippet is None:
        raise BatchError("say what to change with -i, or give a snippet to merge with --snippet")
    options = Options(
        instruction=args.instruction or "", lines=parse_line_range(args.lines) if args.lines else None,
        expand=args.expand, each=args.each, write=args.write or args.test is not None, check=args.check,
        allow_syntax_errors=args.allow_syntax_errors, force=args.force, show_refused=args.show_refused,
        review=_review(args), test=args.test, tries=args.tries, test_timeout=args.test_timeout,
        edit=edit_options(args),  # the same object `rewriter bench --tests` decides each answer with
    )
    params = _sampling_params(args)  # refuses bad settings before any model loads
    if args.endpoint:
        from .engine_factory import EngineError, EngineSettings, api_key, build_engine

        if params != _default_sampling() or args.draft_model or args.mjsd is not None or args.branches is not None \
                or args.self_test:
            _say("--temperature, --top-p, --top-k, --seed, --verification, --draft-model, --mjsd, --branches and "
                 "--self-test apply to the local model, not to --endpoint")
            return 2

        try:
            key = api_key(args.api_key_env, "--api-key-env")
        except EngineError as error:
            _say(str(error))
            return 2
        settings = EngineSettings(url=args.endpoint, model=args.model, api_key=key)

        def make_engine():
            return build_engine(settings)

        workers = args.jobs
    else:
        # Spans of one file share their prompt's prefix (the file as context): reuse its cache.
        settings = _local_settings(args, prefix_cache=True, draft_model=args.draft_model, sampling=params,
                                   mjsd=args.mjsd)

        def make_engine():
            from .engine_factory import configured

            if args.mjsd is not None:
                from .decoding.mjsd import WARNING

                _say(f"warning: --mjsd is on. {WARNING}")
            return configured(_load_local(args, settings), settings)

        workers = 1  # one in-process model decodes one request at a time
    if args.snippet is not None:
        from .apply.snippet import read_snippet, snippet_command

        return snippet_command(args.paths, read_snippet(args.snippet), options, make_engine, json_output=args.json,
                               quiet=args.quiet, say=_say)
    return apply_command(args.paths, options, make_engine, workers=workers, json_output=args.json,
                         quiet=args.quiet, say=_say)


def _review(args: argparse.Namespace):
    """--interactive: the review that asks on stdout and reads the answers from stdin."""
    if not args.interactive:
        return None
    from .apply.plans import BatchError
    from .apply.review import Review

    if args.json:
        raise BatchError("--interactive asks about each hunk, --json prints one report and asks nothing; drop one")
    if args.snippet == "-":
        raise BatchError("--interactive reads its answers from standard input: give --snippet a file, not -")
    return Review(sys.stdin, sys.stdout, _say)


def _default_sampling():
    from .engine import SamplingParams

    return SamplingParams()


def _sampling_params(args: argparse.Namespace):
    from .engine import SamplingParams

    params = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                            seed=args.seed, verification=args.verification)
    if args.mjsd is not None:
        if not args.draft_model:
            raise ValueError("--mjsd needs --draft-model (its beam search drafts)")
        if not params.greedy:
            raise ValueError("--mjsd replaces sampling: leave --temperature at 0")
    return params


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench.command import bench_command

    return bench_command(args, _sampling_params(args), _load_rewriter, _say)


def cmd_lsp(args: argparse.Namespace) -> int:
    from lsp.server import serve

    return serve(args.tcp, args.log_level)


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve.app import serve
    from .serve.schema import Limits

    limits = Limits(max_queue=args.max_queue, max_body_bytes=args.max_body_bytes,
                    max_prompt_tokens=args.max_prompt_tokens, max_output_tokens=args.max_output_tokens,
                    read_timeout_s=args.read_timeout, max_connections=args.max_connections,
                    prefix_cache_mb=args.prefix_cache_mb)
    serve(args.model, host=args.host, port=args.port, device=args.device, limits=limits,
          api_key_file=args.api_key_file, say=_say, allowed_hosts=tuple(args.allowed_host), dtype=args.dtype,
          draft_model=args.draft_model)
    return 0


def cmd_vllm(args: argparse.Namespace) -> int:
    from .serve import vllm

    venv = args.venv or vllm.default_venv()
    if args.vllm_command == "setup":
        try:
            vllm.setup(venv, args.device, args.pip_args.split() if args.pip_args else (), say=_say)
        except vllm.VllmSetupError as error:
            _say(str(error))
            return 1
        return 0
    if not vllm.venv_python(venv).exists() and not args.print:
        _say(f"no vLLM environment at {venv}: make one with `rewriter vllm setup --venv {venv}`")
        return 2
    model, served_name = args.model, args.served_model_name or args.model
    if model in (None, "embedded"):
        from . import EMBEDDED_NAME
        from .weights.models import resolve_checkpoint

        model, served_name = str(resolve_checkpoint(None, _say)), args.served_model_name or EMBEDDED_NAME
    options = vllm.ServerOptions(model=model, served_name=served_name, host=args.host, port=args.port,
                                 device=args.device, speculation=args.speculation, draft_tokens=args.draft_tokens,
                                 max_model_len=args.max_model_len, dtype=args.dtype,
                                 extra=args.vllm_args[1:] if args.vllm_args[:1] == ["--"] else args.vllm_args)
    command = vllm.server_command(venv, options)
    env = vllm.server_environment(args.device)
    if args.print:
        print(" ".join(shlex.quote(part) for part in command))
        return 0
    _say(f"starting vLLM ({args.speculation} speculation) on http://{args.host}:{args.port}/v1, model {served_name}")
    os.execve(command[0], command, env)  # vLLM's server in our place: signals reach it directly


def cmd_doctor(args: argparse.Namespace) -> int:
    from .engine_factory import default_model
    from .weights.doctor import doctor

    progress = _progress(args)
    return doctor(args.model or default_model(progress), args.retime, say=print, progress=progress)


# The subcommands in the order `--help` lists them, each with the function that runs it.
COMMANDS = ((add_apply, cmd_apply), (add_bench, cmd_bench), (add_serve, cmd_serve), (add_lsp, cmd_lsp),
            (add_vllm, cmd_vllm), (add_doctor, cmd_doctor))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rewriter", description="Rewrite code with a local model, fast.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add, run in COMMANDS:
        add(commands).set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `apply --json` promises one JSON report on stdout, failures included.
    json_errors = argv[:1] == ["apply"] and "--json" in argv

    def fail(message: str) -> int:
        if json_errors:
            print(json.dumps({"error": message}), flush=True)
        else:
            _say(message)
        return 2

    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        if json_errors:
            return fail(str(error))
        error.parser.print_usage(sys.stderr)
        print(f"{error.parser.prog}: error: {str(error).removeprefix(error.parser.prog + ': ')}", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except (FileError, ModelError, ValueError) as error:
        return fail(str(error))
    except KeyboardInterrupt:
        _say("interrupted; nothing was written")
        return 130


if __name__ == "__main__":
    sys.exit(main())
