"""The model cache's scratch files and folders: what a process killed midway left is removed by the
next writer (a conversion's folder holds gigabytes), never what a living process still writes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rewriter.weights import models
from rewriter.weights.scratch import scratch_prefix, sweep


def ended_process_prefix() -> str:
    """The scratch prefix of a process that has ended."""
    ended = subprocess.run([sys.executable, "-c", "from rewriter.weights.scratch import scratch_prefix; "
                            "print(scratch_prefix())"], capture_output=True, text=True, check=True)
    return ended.stdout.strip()


def test_only_the_scratch_of_ended_processes_is_swept(tmp_path):
    killed = tmp_path / f"{ended_process_prefix()}abc"
    (killed / "model.safetensors").parent.mkdir()
    (killed / "model.safetensors").write_bytes(b"half a model")
    killed_file = tmp_path / f"{ended_process_prefix()}model.int8.safetensors"
    killed_file.write_bytes(b"half the weights")
    mine = tmp_path / f"{scratch_prefix()}xyz"
    mine.mkdir()
    living = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = tmp_path / f"{scratch_prefix().rsplit('-', 2)[0]}-{living.pid}-def"
        theirs.mkdir()
        other_host = tmp_path / ".scratch-elsewhere-1-ghi"
        other_host.mkdir()
        kept = tmp_path / "model.safetensors"
        kept.write_bytes(b"a whole model")
        assert sorted(sweep(tmp_path)) == sorted([killed, killed_file])
        assert mine.exists() and theirs.exists() and other_host.exists() and kept.exists()
    finally:
        living.kill()
        living.wait()


def test_a_conversion_sweeps_what_a_killed_one_left(tmp_path, monkeypatch):
    from rewriter.weights import gguf_convert

    left = tmp_path / f"{ended_process_prefix()}q8"
    left.mkdir()
    (left / "model.safetensors").write_bytes(b"x" * 1024)

    def convert(gguf_path: Path, work: Path, say) -> None:
        assert work.name.startswith(scratch_prefix())
        (work / "model.safetensors").write_bytes(b"converted")

    monkeypatch.setattr(gguf_convert, "convert_gguf", convert)
    cache_dir = tmp_path / "the-model"
    assert models._convert_gguf(tmp_path / "the-model.gguf", cache_dir, None) == cache_dir
    assert (cache_dir / "model.safetensors").read_bytes() == b"converted"
    assert sorted(os.listdir(tmp_path)) == ["the-model"]
