"""Helpers (no tests): a real vLLM server started by `rewriter vllm serve`, for the vLLM tests."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.service import ROOT, free_port, wait_healthy


def vllm_venv() -> Path | None:
    """The vLLM environment `rewriter vllm setup` made ($REWRITER_VLLM_VENV, else the default),
    when vLLM and the proposer import there."""
    from rewriter.serve.vllm import default_venv, import_failure

    venv = Path(os.environ.get("REWRITER_VLLM_VENV") or default_venv())
    return venv if import_failure(venv) is None else None


class VllmServer:
    """vLLM's OpenAI server in its own process group (it starts an engine and a worker process)."""

    def __init__(self, venv: Path, model: str, speculation: str, log: Path, *vllm_args: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self.log = log
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}  # GiB: a few short requests at a time
        self.output = open(log, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rewriter.cli", "vllm", "serve", "--venv", str(venv), "--model", model,
             "--served-model-name", "model", "--port", str(self.port), "--speculation", speculation,
             "--max-model-len", "4096", "--", "--max-num-seqs", "4", *vllm_args],
            cwd=ROOT, env=env, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 600.0) -> VllmServer:
        wait_healthy(self.process, self.url, self.log, timeout, self.stop)
        return self

    def stop(self) -> None:
        """Stop the server and the engine and worker processes it started."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break  # the whole group is gone
            try:
                self.process.wait(60)
                time.sleep(1)  # the group's other processes end after the server
            except subprocess.TimeoutExpired:
                continue
        self.output.close()
