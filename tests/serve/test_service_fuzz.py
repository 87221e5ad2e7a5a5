"""schemathesis against a live `rewriter serve` (a tiny random Qwen2, an API key): requests
generated from the server's own /openapi.json, valid and not, for every endpoint, in its
examples, coverage and fuzzing phases. Each must be answered within a time limit with a 2xx or
a 4xx, never a 5xx, and each answer must be what the document says (status, content type,
headers, body, each event of a stream); a request the schema refuses must be refused.

schemathesis' engine runs it, as its CLI would (its pytest plugin's lazy schemas do not run on
pytest 9). The generation is deterministic, the same requests every run; REWRITER_FUZZ_RANDOM=1
draws new ones. What it found is kept as regression tests in test_service_findings.py.
"""
from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest
import schemathesis
from schemathesis.engine import Status, events, from_schema

from tests.helpers.service import Server

API_KEY = "fuzz-key-0c41d9"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
MAX_OUTPUT_TOKENS = 4  # keeps each answer short; the document says so (max_tokens' maximum)
REQUEST_TIMEOUT_S = 20.0  # a hang fails the test
MIN_REQUESTS = 1000
EXAMPLES = {"POST /v1/chat/completions": 250, "POST /v1/completions": 150, "POST /v1/rewrites": 200}  # with bodies
EXAMPLES_ELSEWHERE = 30
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance", "negative_data_rejection")


@pytest.fixture(scope="module")
def fuzzed_server(tiny_dir, tmp_path_factory):
    logs = tmp_path_factory.mktemp("fuzz")
    (logs / "key").write_text(API_KEY + "\n")
    server = Server(str(tiny_dir), "--api-key-file", str(logs / "key"), "--max-output-tokens",
                    str(MAX_OUTPUT_TOKENS), "--max-prompt-tokens", "2000", log=logs / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def fuzz_config() -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "headers": AUTH,
        "request-timeout": REQUEST_TIMEOUT_S,
        "generation": {"mode": "all", "max-examples": EXAMPLES_ELSEWHERE,
                       "deterministic": not os.environ.get("REWRITER_FUZZ_RANDOM"), "database": "none"},
        "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True},
                   "stateful": {"enabled": False}},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "operations": [{"include-name": name, "generation": {"max-examples": examples}}
                       for name, examples in EXAMPLES.items()],
    })


def failure_lines(recorder) -> list[str]:
    """Each failed check of a scenario: what failed, and the request that reproduces it."""
    lines = []
    for checks in recorder.checks.values():
        for check in checks:
            if check.status == Status.FAILURE and check.failure_info is not None:
                info = check.failure_info
                lines.append(f"{recorder.label}: {check.name}: {info.failure.title}\n{info.failure.message}\n"
                             f"{info.code_sample}")
    return lines


def cpu_seconds(pid: int | None = None) -> float:
    """This process's CPU time, or another's (from /proc)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_every_generated_request_gets_a_documented_answer(fuzzed_server):
    schema = schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json", config=fuzz_config(), headers=AUTH)
    requests: dict[str, int] = {}
    checked: dict[str, int] = {}
    statuses: dict[int | None, int] = {}
    failures, errors, skipped = [], [], []
    started, client_cpu, server_cpu = time.monotonic(), cpu_seconds(), cpu_seconds(fuzzed_server.process.pid)
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            label = event.recorder.label
            requests[label] = requests.get(label, 0) + len(event.recorder.interactions)
            for interaction in event.recorder.interactions.values():
                status = interaction.response.status_code if interaction.response is not None else None
                statuses[status] = statuses.get(status, 0) + 1
            for check in (check for checks in event.recorder.checks.values() for check in checks):
                checked[check.name] = checked.get(check.name, 0) + 1
            failures += failure_lines(event.recorder)
            if isinstance(event, events.ScenarioFinished) and event.status == Status.SKIP:
                skipped.append(f"{label}: {event.skip_reason}")
        elif isinstance(event, events.NonFatalError):  # a timeout, a dropped connection
            errors.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            errors.append(f"fatal: {event.exception!r}")
    elapsed, client_cpu = time.monotonic() - started, cpu_seconds() - client_cpu
    server_cpu = cpu_seconds(fuzzed_server.process.pid) - server_cpu
    print(f"schemathesis: {sum(requests.values())} requests in {elapsed:.0f}s (CPU: {client_cpu:.0f}s generating "
          f"and checking, {server_cpu:.0f}s serving): {requests}; statuses: {statuses}; checks: {checked}; "
          f"skipped: {skipped}")
    assert errors == [] and failures == [], "\n\n".join(errors + failures)
    assert sum(requests.values()) >= MIN_REQUESTS, requests
    # every operation but GET /openapi.json, which schemathesis does not call: it loaded the schema from it
    operations = {f"{method.upper()} {path}" for path, methods in schema.raw_schema["paths"].items() for method in methods}
    assert set(requests) == operations - {"GET /openapi.json"}
