"""The HTTP service: OpenAI-compatible chat completions with `prediction`, and /v1/rewrites.

A request is parsed and checked (requests.py, OpenAI's error shape for every refusal), prepared
by the backend (backend.py) and queued on the worker (worker.py), which owns the model.
Results come back whole or as server-sent events; a client that goes away cancels its request,
which frees the worker within one step. The handlers are plain functions of the request; what
they share (backend, worker, key, limits) is the app's `Service`.
Who is answered (the API key, the Host names) is access.py's; a job's events are carried to the
client, whole or streamed, by streaming.py.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..decoding.decode import Stats
from ..decoding.rewrite import Rewriter
from ..decoding.sampling import make_verifier
from ..edits.snippets.merge import Merged
from ..engine import SamplingParams
from ..weights.models import LoadedModel
from .access import API_KEY_ENV, LOOPBACK_HOSTS, bearer_token, host_name, is_loopback, read_api_key
from .apply_model import APPLY_MODEL, parsed_and_merged
from .backend import Backend
from .chat_request import ChatRequest, parse_chat
from .completion_request import parse_completion
from .completions import answer_completion
from .openapi import Served, document
from .request_body import ClientGone, read_json
from .schema import ApiError, Limits, check_max_tokens, error_for, parse_rewrite
from .streaming import EventStream, log_done, next_event, sse, start, text_chunks, usage_of, whole_text
from .worker import END, AnsweredJob, QueueFull, Worker

log = logging.getLogger(__name__)


@dataclass
class Service:
    """What the handlers share: one per app."""

    backend: Backend
    worker: Worker
    limits: Limits
    served: list[str]  # the model names requests may ask for (the loaded model's first, then the apply model)
    api_key: str | None
    hosts: set[str]  # Host names served without an API key
    created: int = field(default_factory=lambda: int(time.time()))
    document: dict = field(default_factory=dict)  # what GET /openapi.json answers

    @property
    def name(self) -> str:
        return self.backend.loaded.name

    @property
    def draft_name(self) -> str | None:
        return self.backend.draft.name if self.backend.draft else None


def service_of(request: Request) -> Service:
    return request.app.state.service


def check_host(service: Service, request: Request) -> None:
    # Without a key, any web page could reach a loopback server through a DNS name it
    # controls (DNS rebinding); such requests carry that name in Host.
    if service.api_key is None and host_name(request.headers.get("host", "")) not in service.hosts:
        raise ApiError(403, f"Host {request.headers.get('host', '(none)')!r} is not allowed: without an API key "
                       "this server answers only loopback names (add others with --allowed-host).",
                       code="host_not_allowed", type="permission_error")


def check_auth(request: Request) -> None:
    api_key = service_of(request).api_key
    if api_key is None:
        return
    given = bearer_token(request.headers.get("authorization", "")) or ""
    if not hmac.compare_digest(given.encode(), api_key.encode()):
        raise ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                       code="invalid_api_key")


def submit(service: Service, work, request_id: str, tokens: int):
    try:
        return service.worker.submit(work, tokens=tokens)
    except QueueFull as full:
        log.warning("%s refused: %d requests waiting", request_id, service.worker.waiting)
        # 429, as OpenAI answers an overloaded engine: clients retry it after Retry-After.
        raise ApiError(429, f"The server is busy ({service.worker.waiting} requests waiting); retry in "
                       f"{full.retry_after}s.", code="server_busy", type="server_error",
                       headers={"Retry-After": str(full.retry_after)}) from full


def verifier_for(sampling: SamplingParams):
    """The verifier `sampling` asks for; a 400 where it asks for one that does not exist."""
    try:
        return make_verifier(sampling)
    except ValueError as error:
        raise ApiError(400, f"Invalid sampling parameters: {error}.", param="temperature",
                       code="unsupported_value") from error


# Handlers ---------------------------------------------------------------------------------------


async def chat_completions(request: Request) -> Response:
    check_auth(request)
    service = service_of(request)
    body = await read_json(request, service.limits.max_body_bytes, service.limits.read_timeout_s)
    chat = parse_chat(body, set(service.served))
    check_max_tokens(chat.max_tokens, service.limits)  # also where the apply model's merge needs no model
    if chat.model == APPLY_MODEL:
        return await apply_completions(request, chat)
    verifier = verifier_for(chat.sampling)
    backend = service.backend
    prepared = await asyncio.to_thread(backend.prepare_chat, chat)  # refusals before taking a queue slot
    request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    tokens = min(prepared.budget, len(prepared.prediction) + 16 if prepared.prediction else prepared.budget)
    return await answer_chat(request, chat, submit(service, lambda: backend.chat(prepared, verifier), request_id,
                                                   tokens), request_id)


async def completions(request: Request) -> Response:
    """OpenAI's completions: a raw prompt, no chat template (completions.py)."""
    check_auth(request)
    service = service_of(request)
    body = await read_json(request, service.limits.max_body_bytes, service.limits.read_timeout_s)
    completion = parse_completion(body, set(service.served) - {APPLY_MODEL})
    verifier = verifier_for(completion.sampling)
    backend = service.backend
    planned = await asyncio.to_thread(backend.prepare_completion, completion)  # refusals before a queue slot
    request_id = f"cmpl-{uuid.uuid4().hex[:24]}"
    tokens = min(planned.budget, len(planned.prediction) + 16 if planned.prediction else planned.budget)
    job = submit(service, lambda: backend.completion(planned, verifier), request_id, tokens)
    return await answer_completion(request, completion, job, request_id, f"rewriter-{service.name}")


async def apply_completions(request: Request, chat: ChatRequest) -> Response:
    """The apply model (apply_model.py): the deterministic merge answers at once; the model, on
    the worker, merges what the merge found ambiguous."""
    service = service_of(request)
    backend = service.backend
    apply, merge = await asyncio.to_thread(parsed_and_merged, chat)
    request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    if isinstance(merge, Merged):
        log.info("%s apply: merged without the model in %.0f ms", request_id, 1000 * merge.seconds)
        return await answer_chat(request, chat, AnsweredJob(backend.merged(chat, merge)), request_id)
    log.info("%s apply: %s; the model merges the update", request_id, merge.reason)
    prepared = await asyncio.to_thread(backend.prepare_apply, apply, chat.max_tokens)
    tokens = min(prepared.budget, len(prepared.prediction) + 16)
    return await answer_chat(request, chat, submit(service, lambda: backend.apply(prepared), request_id, tokens),
                             request_id)


async def answer_chat(request: Request, chat: ChatRequest, job, request_id: str) -> Response:
    """The job's answer as a chat completion: whole, or streamed as chunks."""
    job, watcher, first = await start(request, job)
    if first is END:
        return Response(status_code=499)  # the client went away while queued
    base = {"id": request_id, "created": int(time.time()), "model": chat.model,
            "system_fingerprint": f"rewriter-{service_of(request).name}"}
    if chat.stream:
        return EventStream(chat_chunks(chat, base, job, first, request_id), job, watcher)
    return await full_chat(base, job, watcher, first, request_id)


async def full_chat(base: dict, job, watcher: asyncio.Task, first, request_id: str) -> Response:
    """The whole completion in one JSON response."""
    whole = await whole_text(job, watcher, first, request_id, "chat")
    if whole is None:
        return Response(status_code=499)
    text, event = whole
    return JSONResponse({
        **base, "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                     "logprobs": None, "finish_reason": event.stats.finish_reason}],
        "usage": usage_of(event.stats, event.rejected_prediction_tokens),
    })


async def chat_chunks(chat: ChatRequest, base: dict, job, first, request_id: str) -> AsyncGenerator[bytes, None]:
    """The completion as server-sent chunks, as OpenAI streams them."""
    chunk = {**base, "object": "chat.completion.chunk"}
    if chat.include_usage:
        chunk["usage"] = None

    def choice(delta: dict, finish: str | None = None) -> bytes:
        return sse({**chunk, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    yield choice({"role": "assistant", "content": "", "refusal": None})
    async for data in text_chunks(job, first, lambda text: choice({"content": text}), lambda finish: choice({}, finish),
                                  chunk if chat.include_usage else None, request_id, "chat stream"):
        yield data


async def rewrites(request: Request) -> Response:
    check_auth(request)
    service = service_of(request)
    if request.method == "GET":  # what this endpoint is, for clients that detect it
        return JSONResponse({"object": "rewriter.service", "model": service.name, "models": service.served,
                             "hunk_lines": "0-based, end exclusive, in the request text's lines"})
    body = await read_json(request, service.limits.max_body_bytes, service.limits.read_timeout_s)
    backend = service.backend
    prepared = await asyncio.to_thread(backend.prepare_rewrite, parse_rewrite(body))
    request_id = f"rewrite-{uuid.uuid4().hex[:24]}"
    job, watcher, first = await start(request, submit(service, lambda: backend.rewrite(prepared), request_id,
                                                      min(prepared.budget, len(prepared.prediction) + 16)))
    if first is END:
        return Response(status_code=499)
    return EventStream(rewrite_events(job, first, request_id), job, watcher)


async def rewrite_events(job, first, request_id: str) -> AsyncGenerator[bytes, None]:
    """/v1/rewrites' events as the worker yields them, ending with the result (or an error)."""
    event = first
    while True:
        name, data = event
        yield sse(data, name)
        if name == "result":
            log_done(request_id, "rewrite", stats_of(data["stats"]), job)
            return
        try:
            event = await next_event(job)
        except ApiError as error:
            yield sse(error.body(), "error")
            return
        if event is END:
            return


async def models(request: Request) -> Response:
    check_auth(request)
    service = service_of(request)
    return JSONResponse({"object": "list", "data": [_model_card(name, service.created) for name in service.served]})


async def model(request: Request) -> Response:
    check_auth(request)
    service = service_of(request)
    name = request.path_params["name"]
    if name not in service.served:
        raise ApiError(404, f"The model `{name}` does not exist or you do not have access to it.",
                       param="model", code="model_not_found")
    return JSONResponse(_model_card(name, service.created))


async def health(request: Request) -> Response:
    service = service_of(request)
    worker = service.worker
    counters = worker.counters
    return JSONResponse({
        "status": "ok", "model": service.name, "draft_model": service.draft_name,
        "device": str(service.backend.loaded.device),
        "running": worker.running is not None, "waiting": worker.waiting,
        "completed": counters.completed, "cancelled": counters.cancelled, "failed": counters.failed,
        "last_cancel_latency_s": counters.last_cancel_latency_s,
        "last_cancelled_step_s": counters.last_cancelled_step_s,
        # rejected_prediction_tokens as OpenAI counts them; drafts: rejected draft positions
        **service.backend.totals,
    })


async def openapi(request: Request) -> Response:
    check_auth(request)  # it names the served models, as /v1/models does
    return JSONResponse(service_of(request).document)


def guarded(handler):
    """The handler behind the Host check, with every failure answered in OpenAI's error shape."""

    async def run(request: Request) -> Response:
        try:
            check_host(service_of(request), request)
            return await handler(request)
        except ApiError as error:
            return error.response()
        except ClientGone:
            log.info("%s %s: the client hung up before its request was read", request.method, request.url.path)
            return Response(status_code=499)
        except Exception as error:  # never a crash: a 500 in OpenAI's shape
            return error_for(error).response()

    return run


async def http_error(request: Request, error: HTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code)
    message = {404: f"Unknown path {request.url.path}.",
               405: f"Method {request.method} is not allowed on {request.url.path}."}.get(
                   error.status_code, str(error.detail))
    return ApiError(error.status_code, message, code=code, headers=dict(error.headers or {})).response()  # 405's Allow


async def server_error(request: Request, error: Exception) -> Response:
    return error_for(error).response()


ROUTES = [
    Route("/v1/chat/completions", guarded(chat_completions), methods=["POST"]),
    Route("/v1/completions", guarded(completions), methods=["POST"]),
    Route("/v1/rewrites", guarded(rewrites), methods=["GET", "POST"]),
    Route("/v1/models", guarded(models), methods=["GET"]),
    Route("/v1/models/{name:path}", guarded(model), methods=["GET"]),
    Route("/health", guarded(health), methods=["GET"]),
    Route("/openapi.json", guarded(openapi), methods=["GET"]),
]


def create_app(loaded: LoadedModel, limits: Limits | None = None, api_key: str | None = None,
               model_ids: set[str] | None = None, allowed_hosts: tuple[str, ...] = (),
               rewriter: Rewriter | None = None, draft: LoadedModel | None = None) -> Starlette:
    """The app serving `loaded`, drafted for by `draft` where the prediction does not; `rewriter`
    answers /v1/rewrites instead of the model's own (tests)."""
    limits = limits or Limits()
    service = Service(backend=Backend(loaded, limits, rewriter, draft), worker=Worker(max_queue=limits.max_queue),
                      limits=limits, served=[*sorted((model_ids or {loaded.name}) - {APPLY_MODEL}), APPLY_MODEL],
                      api_key=(api_key or "").strip() or None,
                      hosts={*LOOPBACK_HOSTS, *(host_name(h) for h in allowed_hosts)})
    service.document = document(Served(service.served, limits, service.api_key is not None))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        service.worker.close()

    handlers = {HTTPException: http_error, Exception: server_error}
    app = Starlette(routes=ROUTES, exception_handlers=handlers, lifespan=lifespan)  # type: ignore[arg-type]
    app.state.service = service
    return app


def stats_of(data: dict) -> Stats:
    from ..remote import stats_from

    return stats_from(data)


def _model_card(name: str, created: int) -> dict:
    return {"id": name, "object": "model", "created": created, "owned_by": "rewriter"}


def serve(model: str | None = None, host: str = "127.0.0.1", port: int = 8000, device: str | None = None,
          limits: Limits | None = None, api_key_file: str | None = None, say=print,
          allowed_hosts: tuple[str, ...] = (), dtype: str | None = None, draft_model: str | None = None) -> None:
    """Load the model (none named: engine_factory.default_model's choice) and `draft_model`, if named, and
    serve until interrupted. Off loopback, an API key is required."""
    import uvicorn

    from ..engine_factory import EngineSettings, load_models
    from .http_protocol import with_header_timeout

    limits = limits or Limits()

    api_key = read_api_key(api_key_file)
    if not is_loopback(host) and not api_key:
        raise ValueError(f"refusing to listen on {host} without an API key: set {API_KEY_ENV} or pass "
                         "--api-key-file (loopback addresses need none)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    started = time.perf_counter()
    loaded, draft = load_models(EngineSettings(model=model, device=device, dtype=dtype or "auto",
                                                 draft_model=draft_model), say)
    drafting = f"drafted for by {draft.name} ({draft.dtype})" if draft else "no draft model"
    say(f"model {loaded.name} ({loaded.dtype}), {drafting}, ready on {loaded.device} in "
        f"{time.perf_counter() - started:.1f}s")
    app = create_app(loaded, limits, api_key, allowed_hosts=allowed_hosts, draft=draft)
    say(f"serving on http://{host}:{port}/v1 ({'API key required' if api_key else 'no API key'})")
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5,
                http=with_header_timeout(limits.read_timeout_s), limit_concurrency=limits.max_connections,
                timeout_keep_alive=5)
