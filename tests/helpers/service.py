"""Helpers (no tests): starting `rewriter serve` as a subprocess on a free loopback port, for the service tests."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]  # the repository


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def save_tiny_qwen(directory: Path, tokenizer, seed: int = 0) -> Path:
    """A random two-layer Qwen2 with the real Qwen tokenizer and chat template: loads in a second."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    eos = tokenizer.eos_token_id
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
        initializer_range=0.2, eos_token_id=eos, bos_token_id=eos, pad_token_id=eos,
    )
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config.eos_token_id = eos
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def wait_healthy(process: subprocess.Popen, url: str, log: Path, timeout: float, stop) -> None:
    """Until `url`/health answers 200; the log's end in the error when the server exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()[-5000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop()
    raise RuntimeError(f"the server did not start in {timeout}s:\n{log.read_text()[-5000:]}")


class Server:
    """`rewriter serve` in a subprocess; its combined output goes to `log`."""

    def __init__(self, model: str, *args: str, env: dict | None = None, log: Path, threads: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self.log = log
        full_env = {key: value for key, value in os.environ.items() if key != "REWRITER_API_KEY"}
        full_env.update({"OMP_NUM_THREADS": str(threads), "REWRITER_DTYPE": "int8", **(env or {})})
        self.output = open(log, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rewriter.cli", "serve", "--model", model, "--port", str(self.port), *args],
            cwd=ROOT, env=full_env, stdout=self.output, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 180.0) -> Server:
        wait_healthy(self.process, self.url, self.log, timeout, self.stop)
        return self

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.output.close()
