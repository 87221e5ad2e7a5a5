"""The model's side of the HTTP service: what runs on the service's worker.

`prepare_*` run before a request takes a queue slot (tokenizing and checking the limits only);
`chat` and `rewrite` run on the worker (serve/worker.py), one request at a time. A rewrite's
answer goes through an edit session (edits/session.py), as `rewriter apply`'s and the
language server's do.
"""
from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..decoding.completion import PlannedCompletion, StopTrimmer, decode_completion, plan_completion, stop_strings
from ..decoding.decode import Decoder
from ..decoding.rewrite import RewriteError, Rewriter
from ..edits.checks.integrity import Status
from ..edits.hunks import Hunk
from ..edits.node_kinds import grammar_for
from ..edits.pipeline import grammar_of
from ..edits.session import Delta, EditSession
from ..edits.snippets.merge import Merged
from ..edits.snippets.region import snippet_region
from ..edits.target import Target
from ..engine import CompletionRequest
from ..engine_factory import local_engine
from ..prompt import language_for, merge_instruction, prediction_ids
from ..results import Stats
from ..weights.models import LoadedModel
from .apply_model import ApplyRequest, merge_refused
from .chat_request import ChatRequest
from .completion_request import DEFAULT_COMPLETION_TOKENS, CompletionBody
from .schema import ApiError, Limits, RewriteRequest, check_max_tokens

STATS_EVERY_S = 0.5


@dataclass
class ChatDelta:
    text: str
    stats: Stats
    done: bool
    rejected_prediction_tokens: int = 0  # as OpenAI counts them; set on the last delta


@dataclass
class PreparedChat:
    """A chat request checked against the limits and tokenized, before it takes a queue slot."""

    request: ChatRequest
    prompt: list[int]
    prediction: list[int] | None  # the prediction's tokens, without the end of turn
    budget: int


@dataclass
class PreparedRewrite:
    """A /v1/rewrites request planned: its span on the way through the model."""

    request: RewriteRequest
    session: EditSession  # the span in its file, the model's request, what of the answer may be applied
    first_line: int  # the span's first line in the request's text
    prediction: list[int]

    @property
    def budget(self) -> int:
        return self.session.max_new_tokens or 0


def rejected_prediction_tokens(prediction: list[int], completion: list[int], final: bool = True) -> int:
    """OpenAI's count: the prediction's tokens that do not appear in the completion.

    While the completion is still growing (`final` False), only the prediction up to the
    furthest point the completion has matched counts.
    """
    blocks = difflib.SequenceMatcher(None, prediction, completion, autojunk=False).get_matching_blocks()
    matched = sum(block.size for block in blocks)
    reached = len(prediction) if final else max((b.a + b.size for b in blocks if b.size), default=0)
    return reached - matched


class Backend:
    """The loaded model and everything that decodes with it.

    prepare_* run before queueing (tokenizing only); chat and rewrite run on the engine's worker.
    """

    def __init__(self, loaded: LoadedModel, limits: Limits, rewriter: Rewriter | None = None,
                 draft: LoadedModel | None = None):
        self.loaded = loaded
        self.draft = draft  # drafts where the prediction does not, for chat and rewrites alike
        self.tokenizer = loaded.tokenizer
        self.limits = limits
        self.decoder = Decoder(loaded.model, loaded.tokenizer, prefix_cache=True, pass_costs=loaded.pass_costs(),
                               prefix_cache_bytes=limits.prefix_cache_mb << 20)
        # What answers /v1/rewrites and drafts for chat: the model's Rewriter (tests script one
        # with the same interface).
        self.rewriter = rewriter or local_engine(loaded, decoder=self.decoder, draft=draft)
        self.context_length = loaded.context_length
        self.max_prompt_tokens = min(limits.max_prompt_tokens or self.context_length, self.context_length - 1)
        # Totals over completed requests, for /health.
        self.totals = {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
                       "rejected_prediction_drafts": 0}

    def prepare_chat(self, request: ChatRequest) -> PreparedChat:
        check_max_tokens(request.max_tokens, self.limits)
        prompt = self.rewriter.encode_messages(request.messages)
        if len(prompt) > self.max_prompt_tokens:
            raise ApiError(400, f"The messages take {len(prompt)} tokens; this server takes at most "
                           f"{self.max_prompt_tokens} prompt tokens. Please shorten them.", param="messages",
                           code="context_length_exceeded")
        room = self.context_length - len(prompt)
        if request.max_tokens and request.max_tokens > room:
            raise ApiError(400, f"This model's maximum context length is {self.context_length} tokens. However, "
                           f"you requested {len(prompt) + request.max_tokens} tokens ({len(prompt)} in the "
                           f"messages, {request.max_tokens} in the completion). Please reduce the length of the "
                           "messages or completion.", param="max_tokens", code="context_length_exceeded")
        budget = min(request.max_tokens or self.limits.max_output_tokens, room)
        prediction = None
        if request.prediction is not None:
            prediction = self.tokenizer.encode(request.prediction, add_special_tokens=False)
        return PreparedChat(request, prompt, prediction, budget)

    def chat(self, prepared: PreparedChat, verifier) -> Iterator[ChatDelta]:
        request = prepared.request
        # Drafted as a rewrite is: the prediction (none: prompt lookup alone), then the draft model.
        # Its drafts are its argmax, one-hot, which the sampling verifiers take without changing
        # the distribution, so sampled requests use it too.
        predicted = prediction_ids(self.tokenizer, request.prediction) if request.prediction is not None else []
        drafter = self.rewriter.drafter(predicted)
        stop = stop_strings(self.tokenizer, request.stop) if request.stop else None
        trimmer = StopTrimmer(request.stop)
        output: list[int] = []
        for step in self.decoder.generate(prepared.prompt, drafter, prepared.budget, stop, verifier):
            output += step.tokens
            rejected = 0
            if step.done:
                rejected = rejected_prediction_tokens(prepared.prediction or [], output)
                self._count(step.stats, rejected)
            yield ChatDelta(trimmer.feed(step.text, step.done), dataclasses.replace(step.stats), step.done,
                            rejected)

    def prepare_completion(self, body: CompletionBody) -> PlannedCompletion:
        """A raw completion tokenized and checked against the limits, before it takes a queue slot."""
        check_max_tokens(body.max_tokens, self.limits)
        request = CompletionRequest(body.prompt, body.prediction, body.max_tokens, tuple(body.stop), body.sampling)
        try:
            planned = plan_completion(self.tokenizer, self.context_length, request, DEFAULT_COMPLETION_TOKENS)
        except RewriteError as error:
            raise ApiError(400, str(error), param="prompt", code="context_length_exceeded") from error
        prompt = len(planned.prompt)
        if prompt > self.max_prompt_tokens:
            raise ApiError(400, f"The prompt takes {prompt} tokens; this server takes at most "
                           f"{self.max_prompt_tokens} prompt tokens. Please shorten it.", param="prompt",
                           code="context_length_exceeded")
        if body.max_tokens and prompt + body.max_tokens > self.context_length:
            raise ApiError(400, f"This model's maximum context length is {self.context_length} tokens. However, "
                           f"you requested {prompt + body.max_tokens} tokens ({prompt} in the prompt, "
                           f"{body.max_tokens} in the completion). Please reduce the length of the prompt or "
                           "completion.", param="max_tokens", code="context_length_exceeded")
        planned.budget = min(planned.budget, self.limits.max_output_tokens)
        return planned

    def completion(self, planned: PlannedCompletion, verifier) -> Iterator[ChatDelta]:
        """A raw completion's pieces (decoding/completion.py), OpenAI's rejected count on the last."""
        drafter = self.rewriter.completion_drafter(planned)
        for piece in decode_completion(self.decoder, drafter, planned, verifier):
            rejected = 0
            if piece.done:
                rejected = rejected_prediction_tokens(planned.prediction or [], piece.output)
                self._count(piece.stats, rejected)
            yield ChatDelta(piece.text, piece.stats, piece.done, rejected)

    def _count(self, stats: Stats, rejected: int) -> None:
        self.totals["accepted_prediction_tokens"] += stats.accepted_prediction_tokens
        self.totals["rejected_prediction_tokens"] += rejected
        self.totals["rejected_prediction_drafts"] += stats.rejected_prediction_tokens

    def prepare_rewrite(self, request: RewriteRequest) -> PreparedRewrite:
        target = target_of(request)
        language = request.language or language_for(request.file_name or "")
        context = request.context if request.context is not None else request.text if request.lines else None
        check_max_tokens(request.max_tokens, self.limits)
        # The checks need a grammar: named, from the file name, else guessed from the code.
        session = EditSession(self.rewriter, target, request.instruction, language,
                              grammar=grammar_of(language, target.text), context=context,
                              judged_instruction=request.judged_instruction, conversation=request.conversation,
                              snippet=request.snippet)
        sent = session.request()  # the limits are checked on exactly what the session will send
        try:  # stream() plans again on the worker (tokenizing is cheap)
            prompt, prediction, budget = self.rewriter.plan(sent.code, sent.instruction, sent.language, sent.context,
                                                            request.max_tokens)
        except RewriteError as error:
            raise ApiError(400, str(error), param="text", code="invalid_rewrite") from error
        if len(prompt) > self.max_prompt_tokens:
            raise ApiError(400, f"The prompt takes {len(prompt)} tokens; this server takes at most "
                           f"{self.max_prompt_tokens}. Rewrite a smaller part.", param="text",
                           code="invalid_rewrite")
        if prediction and prediction[-1] == self.tokenizer.eos_token_id:
            prediction = prediction[:-1]
        session.max_new_tokens = min(budget, self.limits.max_output_tokens)
        return PreparedRewrite(request, session, request.lines.start if request.lines else 0, prediction)

    def rewrite(self, prepared: PreparedRewrite) -> Iterator[tuple[str, dict]]:
        """(event, data) pairs for /v1/rewrites: delta, hunk, stats, then result."""
        request, session = prepared.request, prepared.session
        answer = ""
        stats_sent = time.perf_counter()

        def shifted(found: list[Hunk]) -> Iterator[tuple[str, dict]]:
            for hunk in found:
                yield "hunk", {"start": hunk.start + prepared.first_line, "end": hunk.end + prepared.first_line,
                               "lines": list(hunk.lines)}

        def stats_data(stats: Stats, final: bool) -> dict:
            # The answer's tokens again (the stream gives text): OpenAI's count needs them.
            completion = self.tokenizer.encode(answer, add_special_tokens=False)
            return {**stats.as_dict(), "rejected_prediction_drafts": stats.rejected_prediction_tokens,
                    "rejected_prediction_tokens": rejected_prediction_tokens(prepared.prediction, completion, final)}

        for event in session.run():
            if isinstance(event, Delta):
                answer += event.text
                yield "delta", {"text": event.text}
                yield from shifted(event.hunks)
                if time.perf_counter() - stats_sent >= STATS_EVERY_S:
                    stats_sent = time.perf_counter()
                    yield "stats", stats_data(event.stats, final=False)
                continue
            result, decision = event.result, event.decision
            answer = result.answer
            if not event.restart:
                yield from shifted(event.hunks)
            stats = stats_data(result.stats, final=True)
            self._count(result.stats, stats["rejected_prediction_tokens"])
            yield "stats", stats
            data = {"text": decision.text, "answer": result.answer, "changed": decision.text != session.original,
                    "stats": stats, "integrity": decision.status}
            if decision.status == Status.STRIPPED:
                data["stripped"] = decision.reason
            if decision.refused:
                data["refused"] = {"reason": decision.reason, "text": decision.refused_text}
            if request.lines:
                target = session.edit.target
                data["selection"] = decision.text
                data["text"] = target.replaced_by(decision.text)
            yield "result", data

    def merged(self, chat: ChatRequest, merge: Merged) -> ChatDelta:
        """The apply model's answer from the deterministic merge (no model ran: the usage counts
        the message's and the merged code's tokens)."""
        count = len(self.tokenizer.encode(chat.messages[0]["content"], add_special_tokens=False))
        written = len(self.tokenizer.encode(merge.text, add_special_tokens=False))
        stats = Stats(prompt_tokens=count, output_tokens=written, total_s=merge.seconds, finish_reason="stop")
        return ChatDelta(merge.text, stats, True)

    def prepare_apply(self, apply: ApplyRequest, max_tokens: int | None) -> PreparedRewrite:
        """The apply model's ambiguous update, planned as a rewrite of the region it goes in (the
        whole code where that cannot be told, edits/snippets/region.py): the update in the
        instruction, the user's own instruction alone read by the integrity check."""
        instruction = merge_instruction(apply.update, apply.language, apply.instruction)
        grammar = grammar_for(apply.language) if apply.language else None
        region = snippet_region(apply.code, apply.update, grammar)
        lines = None if region.start == 0 and region.end == len(apply.code) else region.lines
        return self.prepare_rewrite(RewriteRequest(apply.code, instruction, apply.language, max_tokens=max_tokens,
                                                   judged_instruction=apply.instruction, lines=lines,
                                                   snippet=apply.update))

    def apply(self, prepared: PreparedRewrite) -> Iterator[ChatDelta]:
        """The model's merge for the apply model: empty deltas while it decodes (a cancel stops it
        within a step), then the judged merge, whole; a refused one raises merge_refused."""
        for event in prepared.session.run():
            if isinstance(event, Delta):
                yield ChatDelta("", dataclasses.replace(event.stats), False)
                continue
            if event.decision.refused:
                raise merge_refused(event.decision.reason)
            completion = self.tokenizer.encode(event.result.answer, add_special_tokens=False)
            rejected = rejected_prediction_tokens(prepared.prediction, completion)
            self._count(event.result.stats, rejected)
            target = prepared.session.edit.target  # the region: the code around it stays as sent
            merged = target.replaced_by(event.decision.text)
            yield ChatDelta(merged, dataclasses.replace(event.result.stats), True, rejected)


def target_of(request: RewriteRequest) -> Target:
    """What a /v1/rewrites request rewrites: the lines its `range` names in its text, else its
    text, placed in the context when it occurs there once."""
    if request.lines:
        return Target.of_lines(request.text, request.lines)
    context = request.context
    if context and request.text and context.count(request.text) == 1:
        start = context.index(request.text)
        return Target.of_span(context, start, start + len(request.text))
    return Target.whole(request.text)

