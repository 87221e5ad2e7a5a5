"""`rewriter apply --write` killed with SIGKILL at random moments: every file holds its old bytes
or its new bytes, never a mix, and what may remain beside it is a temporary file of ours.

The CLI runs for real, against a fake OpenAI-compatible endpoint, in a process forked for each run
from one that imported it already (tests/helpers/forked_cli.py), so that hundreds of runs fit in
a couple of minutes. A kill between a temporary file's creation and its rename leaves that file
behind: how many did is how many kills landed inside a write.
"""
from __future__ import annotations

import os
import random
import re
import signal
import time

from rewriter.apply.files import TEMP_MARK
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.forked_cli import ForkedCli

KILLS = 200
SECONDS = 150  # at most, whatever the machine's load: the kills done by then are counted


def contents() -> dict[str, bytes]:
    """Two large files (the write of each takes a while) and a few small ones, Python among them."""
    files = {f"big_{n}.txt": "".join(f"value_{n}_{i} = {i}  # a line of padding text\n"
                                      for i in range(2_000)).encode() for n in range(2)}
    files.update({f"small_{n}.py": f"def value_{n}():\n    return {n}\n".encode() for n in range(4)})
    return files


def rewritten(text: str) -> str:
    """The endpoint's answer: the first `value_` renamed, the rest repeated."""
    return text.replace("value_", "item_", 1)


def test_sigkill_at_random_moments_leaves_each_file_old_or_new(tmp_path):
    old = contents()
    new = {name: rewritten(data.decode()).encode() for name, data in old.items()}
    temp_name = re.compile(rf"\.({'|'.join(map(re.escape, old))}){re.escape(TEMP_MARK)}\w+\.tmp")
    chooser = random.Random(71)
    seen = {"old": 0, "new": 0, "mixed runs": 0, "temporary files": 0, "finished": 0}

    def reset() -> None:
        for path in tmp_path.iterdir():
            path.unlink()
        for name, data in old.items():
            (tmp_path / name).write_bytes(data)

    def judge() -> None:
        states = set()
        for path in tmp_path.iterdir():
            data = path.read_bytes()
            if path.name in old:
                assert data in (old[path.name], new[path.name]), f"{path.name} holds neither its old nor new bytes"
                state = "old" if data == old[path.name] else "new"
                states.add(state)
                seen[state] += 1
            else:
                match = temp_name.fullmatch(path.name)
                assert match, f"a stray file: {path.name}"
                assert new[match.group(1)].startswith(data)  # part of the new bytes, never read
                seen["temporary files"] += 1
        seen["mixed runs"] += states == {"old", "new"}

    with FakeOpenAI("fake", lambda body: rewritten(body["prediction"]["content"]), [],
                    chunk_chars=1 << 20) as endpoint, ForkedCli() as cli:
        argv = ["apply", *old, "-i", "Rename value to item", "--write", "--endpoint", endpoint.url, "-q"]
        runs = []
        for _ in range(3):  # the first is slower (caches still cold): the runs killed are timed by the others
            reset()
            started = time.monotonic()
            cli.start(argv, tmp_path)
            assert cli.wait() == 0
            runs.append(time.monotonic() - started)
            assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == new
        whole_run = sorted(runs)[1]
        kills, deadline = 0, time.monotonic() + SECONDS
        while kills < KILLS and time.monotonic() < deadline:
            reset()
            pid = cli.start(argv, tmp_path)
            time.sleep(chooser.uniform(0, whole_run))
            os.kill(pid, signal.SIGKILL)
            status = cli.wait()
            kills += status == -signal.SIGKILL
            seen["finished"] += status == 0
            assert status in (0, -signal.SIGKILL)
            judge()
    print(f"{kills} kills in runs of {whole_run:.2f}s ({', '.join(f'{run:.2f}' for run in runs)}): {seen}")
    assert kills >= KILLS
    assert seen["temporary files"] > 0 and seen["mixed runs"] > 0  # some kills landed inside the writes
