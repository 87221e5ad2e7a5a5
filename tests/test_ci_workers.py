"""CI's two pytest workers (.ci/run: -n 2 --dist loadgroup): the real-model tests stay on one
worker, in order, and every other module stays whole on one. A pytest or pytest-xdist that loses
the groups (pytest 9.2 with pytest-xdist 3.8 does) would run two models at once, silently."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.helpers.service import ROOT

MODULE = '''import time
import pytest

{mark}

@pytest.mark.parametrize("n", range(4))
def test_step(n):
    time.sleep(0.1)  # long enough for both workers to take work
'''


def test_real_model_tests_share_one_worker_and_each_other_module_stays_whole(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.helpers.workers import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers = real_model: uses a real model\n")
    for name in ("real_a", "real_b"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(mark="pytestmark = pytest.mark.real_model"))
    for name in ("plain_a", "plain_b", "plain_c"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(mark=""))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "--no-loadscope-reorder", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module, group in re.findall(r"\[(gw\d)\] .*? PASSED (?:\S*/)?test_(\w+)\.py::\S+@(\S+)", run.stdout):
        workers["real_model" if group == "real_model" else module].add(worker)
        assert (group == "real_model") == module.startswith("real")
    assert set(workers) == {"real_model", "plain_a", "plain_b", "plain_c"}, run.stdout[-3000:]
    assert all(len(used) == 1 for used in workers.values()), dict(workers)
