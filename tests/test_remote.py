"""The remote engine against scripted endpoints (httpx.MockTransport): no server, no model."""
from __future__ import annotations

import json

import httpx
import pytest

from rewriter.answer import NoCodeBlock
from rewriter.decoding.rewrite import Progress, RewriteError, RewriteResult
from rewriter.edits.hunks import Hunk, apply_hunks
from rewriter.edits.session import Delta, EditSession, Finished
from rewriter.edits.target import Target
from rewriter.engine import EditRequest, SamplingParams
from rewriter.prompt import build_prompt
from rewriter.remote import RemoteRewriter, ServiceError, _parse_sse
from rewriter.results import Stats, UnsupportedSampling
from tests.helpers.engines import rewrite_with

ORIGINAL = "def f(a):\r\n    x = a + 1\r\n    y = x * 2\r\n    z = y - 3\r\n    w = z / 4\r\n    return w\r\n"
ANSWER = ("Here you go:\n```python\ndef f(a: int) -> float:\n    x = a + 1\n    y = x * 2\n    z = y - 3\n"
          "    w = z / 4\n    return w\n```\n")
EDITED = ORIGINAL.replace("def f(a):", "def f(a: int) -> float:")


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


class Answering:
    """An engine that streams `answer` in pieces, then the result `text`."""

    concurrent = ready = True

    def __init__(self, answer: str, text: str):
        self.answer, self.text = answer, text

    def load(self, say) -> None:
        pass

    def close(self) -> None:
        pass

    def stream(self, request):
        stats = Stats(finish_reason="stop")
        for piece in pieces(self.answer):
            yield Progress(piece, stats)
        yield RewriteResult(text=self.text, answer=self.answer, stats=stats)


def whole_file_session(engine, text: str, instruction: str, language: str = "python", **options) -> list:
    return list(EditSession(engine, Target.whole(text), instruction, language, **options).run())


def session_hunks(events: list) -> tuple[list[Hunk], list[Hunk]]:
    """The hunks settled while the answer streamed, and those the end added."""
    streamed = [hunk for event in events if isinstance(event, Delta) for hunk in event.hunks]
    finished = events[-1]
    assert isinstance(finished, Finished) and not finished.restart
    return streamed, finished.hunks


def test_session_hunks_settle_while_streaming_and_rebuild_the_result():
    settled_early, at_the_end = session_hunks(whole_file_session(Answering(ANSWER, EDITED), ORIGINAL, "add type hints"))
    assert settled_early == [Hunk(0, 1, ("def f(a: int) -> float:\r\n",))]  # CRLF kept, as the result has it
    assert at_the_end == []
    assert apply_hunks(ORIGINAL, settled_early) == EDITED


def test_session_hunks_before_the_fence_and_for_a_changed_ending():
    events = whole_file_session(Answering("Sure\n```py\na\nc\n```\n", "a\nc\n"), "a\nb\n", "change b", "")
    assert events[0].hunks == [] and events[1].hunks == []  # "Sur", "e\n`": no fence line yet
    found = [hunk for hunks in session_hunks(events) for hunk in hunks]
    assert apply_hunks("a\nb\n", found) == "a\nc\n"


def test_parse_sse_events_comments_and_done():
    lines = [": keep-alive", "event: hunk", "data: {\"a\":", "data: 1}", "", "data: {\"b\": 2}", "",
             "data: [DONE]", "", "data: {\"late\": 1}", ""]
    assert list(_parse_sse(iter(lines))) == [("hunk", {"a": 1}), ("message", {"b": 2})]
    with pytest.raises(ServiceError, match="not JSON"):
        list(_parse_sse(iter(["data: {oops", ""])))


def sse_body(events: list[tuple[str | None, object]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


def openai_endpoint(seen: list[dict], answer: str = ANSWER, failures: list[httpx.Response] | None = None):
    """A scripted OpenAI-compatible endpoint that only streams text."""
    failures = list(failures or [])

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404, json={"error": {"message": "no such path"}})
        assert request.url.path == "/v1/chat/completions"
        seen.append(json.loads(request.content))
        if failures:
            return failures.pop(0)
        chunks = [(None, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
        chunks += [(None, {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
                   for p in pieces(answer)]
        chunks.append((None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        chunks.append((None, {"choices": [], "usage": {
            "prompt_tokens": 90, "completion_tokens": 40, "total_tokens": 130,
            "prompt_tokens_details": {"cached_tokens": 12},
            "completion_tokens_details": {"accepted_prediction_tokens": 33, "rejected_prediction_tokens": 4}}}))
        chunks.append((None, "[DONE]"))
        return httpx.Response(200, content=sse_body(chunks), headers={"content-type": "text/event-stream"})

    return httpx.Client(transport=httpx.MockTransport(handle))


def test_openai_endpoint_text_stream_becomes_progress_hunks_and_result():
    seen: list[dict] = []
    engine = RemoteRewriter("https://llm.example/v1", model="gpt-4o", http=openai_endpoint(seen))
    events = whole_file_session(engine, ORIGINAL, "add type hints", max_new_tokens=200)
    assert engine.protocol == "openai"  # GET /v1/rewrites was not ours
    request = seen[0]
    prompt = build_prompt(ORIGINAL.replace("\r\n", "\n"), "add type hints", "python")
    assert request["messages"] == prompt.messages
    assert request["prediction"] == {"type": "content", "content": prompt.prediction}
    assert request["model"] == "gpt-4o" and request["stream"] and request["temperature"] == 0
    assert request["max_completion_tokens"] == 200
    progress = [e for e in events if isinstance(e, Delta)]
    streamed, at_the_end = session_hunks(events)
    result = events[-1].result
    assert "".join(p.text for p in progress) == ANSWER
    # The model was sent LF and answered LF; the session gives the edit back in the file's CRLF.
    assert isinstance(result, RewriteResult) and result.text == EDITED.replace("\r\n", "\n") and result.answer == ANSWER
    assert events[-1].decision.text == EDITED and apply_hunks(ORIGINAL, streamed + at_the_end) == EDITED
    assert streamed  # it settled before the answer ended
    stats = result.stats
    assert (stats.prompt_tokens, stats.output_tokens, stats.cached_prompt_tokens) == (90, 40, 12)
    assert (stats.accepted_prediction_tokens, stats.rejected_prediction_tokens) == (33, 4)
    assert stats.finish_reason == "stop"
    # The engine interface: answer increments, then the result.
    assert [type(e) for e in engine.stream(EditRequest(ORIGINAL, "add type hints", "python"))][-1] is RewriteResult


def test_an_answer_that_goes_on_copying_the_file_is_cut_and_its_stream_closed():
    # A small model asked for one function of a file copies the function after it: the local
    # engine stops there (answer.echo_scan), and so does the client of any OpenAI endpoint.
    span = "def f(a):\n    return a + 1\n"
    after = "\n\ndef g(b):\n    total = b * 2\n    return total\n"
    context = "import os\n\n" + span + after
    answer = "```python\ndef f(a: int) -> int:\n    return a + 1\n" + after.lstrip("\n") + "```\n"
    seen: list[dict] = []
    endpoint = openai_endpoint(seen, answer=answer)

    class Watched(httpx.SyncByteStream):
        """The endpoint's events one by one, counting how many were read before the stream closed."""

        def __init__(self, body: bytes):
            self.events = body.split(b"\n\n")
            self.read = self.read_when_closed = 0

        def __iter__(self):
            for event in self.events:
                self.read += 1
                yield event + b"\n\n"

        def close(self):
            self.read_when_closed = self.read

    watched: list[Watched] = []

    def handle(request):
        response = endpoint._transport.handle_request(request)
        if request.method == "POST":
            watched.append(Watched(response.read()))
            response = httpx.Response(200, stream=watched[-1], headers=response.headers)
        return response

    engine = RemoteRewriter("https://llm.example/v1", http=httpx.Client(transport=httpx.MockTransport(handle)))
    start = context.index(span)
    events = list(EditSession(engine, Target.of_span(context, start, start + len(span)), "add type hints", "python").run())
    result = events[-1].result
    assert seen[0]["messages"] == build_prompt(span, "add type hints", "python", context).messages
    assert isinstance(result, RewriteResult) and result.text == "def f(a: int) -> int:\n    return a + 1\n"
    assert "def g" not in "".join(e.text for e in events if isinstance(e, Delta))  # never shown
    assert result.stats.echo_dropped_chars > 0 and result.stats.finish_reason == "stop"
    # The stream was given up at the copy, so the endpoint stops decoding.
    assert 0 < watched[0].read_when_closed < len(watched[0].events) - 5
    assert sum(len(hunks) for hunks in session_hunks(events)) >= 1


def test_busy_endpoint_is_retried_after_its_delay_and_errors_are_mapped():
    seen: list[dict] = []
    busy = httpx.Response(503, headers={"Retry-After": "0"}, json={"error": {"message": "busy"}})
    engine = RemoteRewriter("http://127.0.0.1:9/v1", protocol="openai",
                            http=openai_endpoint(seen, failures=[busy, busy]))
    assert rewrite_with(engine, ORIGINAL, "add type hints").text == EDITED
    assert len(seen) == 3

    refused = httpx.Response(400, json={"error": {"message": "bad max_tokens", "type": "invalid_request_error"}})
    with pytest.raises(RewriteError, match="bad max_tokens"):
        rewrite_with(RemoteRewriter("http://h/v1", protocol="openai", http=openai_endpoint([], failures=[refused])),
                     ORIGINAL, "x")
    denied = httpx.Response(401, json={"error": {"message": "Incorrect API key", "code": "invalid_api_key"}})
    with pytest.raises(ServiceError) as raised:
        rewrite_with(RemoteRewriter("http://h/v1", protocol="openai", http=openai_endpoint([], failures=[denied])),
                     ORIGINAL, "x")
    assert raised.value.status == 401 and raised.value.code == "invalid_api_key"
    still_busy = [httpx.Response(503, headers={"Retry-After": "0"}, json={"error": {"message": "busy"}})] * 2
    with pytest.raises(ServiceError) as raised:
        rewrite_with(RemoteRewriter("http://h/v1", protocol="openai", retries=1,
                                    http=openai_endpoint([], failures=still_busy)), ORIGINAL, "x")
    assert raised.value.status == 503
    with pytest.raises(NoCodeBlock):
        rewrite_with(RemoteRewriter("http://h/v1", protocol="openai", http=openai_endpoint([], answer="No.")),
                     ORIGINAL, "x")


def test_our_service_events_become_progress_hunks_and_result():
    stats = {"prompt_tokens": 80, "output_tokens": 30, "accepted_prediction_tokens": 25, "tokens_per_s": 9.0,
             "some_future_field": 1}
    events = [("delta", {"text": "```python\n"}), ("stats", stats),
              ("hunk", {"start": 0, "end": 1, "lines": ["def f(a: int) -> float:\r\n"]}),
              ("delta", {"text": "..."}),
              ("result", {"text": EDITED, "answer": ANSWER, "changed": True, "stats": stats})]
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "rewriter.service"})
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=sse_body(events), headers={"content-type": "text/event-stream"})

    engine = RemoteRewriter("http://127.0.0.1:8000", http=httpx.Client(transport=httpx.MockTransport(handle)))
    assert engine.base_url == "http://127.0.0.1:8000/v1"
    out = list(engine.stream(EditRequest(ORIGINAL, "add type hints", "python", context="whole file")))
    assert engine.protocol == "rewriter"
    assert seen == [{"text": ORIGINAL, "instruction": "add type hints", "language": "python",
                     "context": "whole file"}]
    assert [type(e) for e in out] == [Progress, Progress, RewriteResult]  # the session derives the hunks
    assert out[1].stats.accepted_prediction_tokens == 25  # progress carries the latest stats
    assert out[-1].text == EDITED and out[-1].stats.output_tokens == 30


def test_bad_urls_and_empty_instructions_are_refused_early():
    with pytest.raises(ValueError):
        RemoteRewriter("localhost:8000")
    with pytest.raises(RewriteError):
        list(RemoteRewriter("http://h/v1", protocol="openai").stream(EditRequest("x\n", " ")))


def test_the_request_sampling_goes_to_an_openai_endpoint():
    seen: list[dict] = []
    engine = RemoteRewriter("http://h/v1", protocol="openai", http=openai_endpoint(seen))
    sampled = SamplingParams(temperature=0.7, top_p=0.9, seed=11)
    assert rewrite_with(engine, ORIGINAL, "add type hints", sampling=sampled).text == EDITED
    assert (seen[0]["temperature"], seen[0]["top_p"], seen[0]["seed"]) == (0.7, 0.9, 11)
    rewrite_with(engine, ORIGINAL, "add type hints", sampling=SamplingParams(temperature=1.0))
    assert (seen[1]["temperature"], seen[1]["top_p"]) == (1.0, 1.0) and "seed" not in seen[1]
    rewrite_with(engine, ORIGINAL, "add type hints", sampling=SamplingParams(seed=11))  # greedy: nothing to sample
    assert seen[2]["temperature"] == 0 and "top_p" not in seen[2] and "seed" not in seen[2]


def test_sampling_an_endpoint_cannot_express_is_refused_before_any_request():
    seen: list[dict] = []
    engine = RemoteRewriter("http://h/v1", protocol="openai", http=openai_endpoint(seen))
    with pytest.raises(UnsupportedSampling, match="top_k"):
        rewrite_with(engine, ORIGINAL, "x", sampling=SamplingParams(temperature=0.7, top_k=40))
    with pytest.raises(UnsupportedSampling, match="verification"):
        rewrite_with(engine, ORIGINAL, "x", sampling=SamplingParams(temperature=0.7, verification="token"))
    assert seen == []

    def ours(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "rewriter.service"})
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=sse_body([("result", {"text": EDITED, "answer": ANSWER, "stats": {}})]),
                              headers={"content-type": "text/event-stream"})

    service = RemoteRewriter("http://h/v1", http=httpx.Client(transport=httpx.MockTransport(ours)))
    with pytest.raises(UnsupportedSampling, match="greedily"):  # a RewriteError: front ends refuse it as such
        rewrite_with(service, ORIGINAL, "x", sampling=SamplingParams(temperature=0.7))
    assert seen == []
    assert rewrite_with(service, ORIGINAL, "x", sampling=SamplingParams()).text == EDITED
