"""One rewrite on the local model: prompt ids, prediction, speculative decoding, the answer as it settles."""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from drafters import Drafter, lookup_drafter, rewrite_drafter
from drafters.draft_model import PredictionThenModelDrafter

from ..answer import AnswerStream, NoCodeBlock, closing_fence_end, echo_scan
from ..engine import CompletionRequest, EditRequest, SamplingParams, Turn, require_instruction
from ..prompt import RewritePrompt, build_prompt, first_turn, prediction_ids
from ..results import ContextTooLarge, Progress, RewriteError, RewriteResult  # noqa: F401 (re-exported: defined here before)
from .branches import Branched, Hesitation, HesitationRecorder, mean_log_prob
from .completion import CompletionPiece, PlannedCompletion, decode_completion, plan_completion
from .decode import Decoder, Stats, StopCheck
from .prefix_cache import PREFIX_CACHE_BYTES
from .sampling import make_verifier, model_drafter
from .verify import Verifier

if TYPE_CHECKING:
    from ..next_edit.base import NextEditPrompt
    from ..results import Completion
    from ..weights.models import LoadedModel

BRANCHED_REQUESTS_KEPT = 4  # a file's blind request and its later tries' (rewriter apply --test)


def fence_stop(tokenizer, prefill: str = "") -> StopCheck:
    """Stop once the answer's closing fence line is complete, keeping the fewest tokens that hold it.

    `prefill` is the answer's opening that the prompt already holds (it has the opening fence).
    """

    def check(output: list[int]) -> int | None:
        if closing_fence_end(prefill + tokenizer.decode(output, skip_special_tokens=True)) is None:
            return None
        keep = len(output)
        while keep > 1 and closing_fence_end(
                prefill + tokenizer.decode(output[: keep - 1], skip_special_tokens=True)) is not None:
            keep -= 1
        return keep

    return check


class AnswerEnd:
    """The stop check of one request: the closing fence, or the start of an echo of the file.

    An echo (the answer going on with the lines that follow the span, see answer.echo_scan)
    stops decoding at the first token that reaches it; `cut` then says where the answer's
    text ends. Every token kept is the one plain greedy decoding gives: this only decides
    when to stop.
    """

    def __init__(self, tokenizer, prefill: str = "", echo_targets: tuple[tuple[str, ...], ...] = ()):
        self.tokenizer = tokenizer
        self.prefill = prefill
        self.echo_targets = echo_targets
        self.fence = fence_stop(tokenizer, prefill)
        self.cut: int | None = None  # in prefill + answer text
        self.dropped = 0  # characters of the copy written when decoding stopped

    def text(self, output: list[int]) -> str:
        return self.prefill + self.tokenizer.decode(output, skip_special_tokens=True)

    def __call__(self, output: list[int]) -> int | None:
        if self.echo_targets:
            text = self.text(output)
            cut = echo_scan(text, self.echo_targets).cut
            if cut is not None:
                self.cut, self.dropped = cut, len(text) - cut
                keep = len(output)
                while keep > 1 and len(self.text(output[: keep - 1])) >= cut:
                    keep -= 1
                return keep
        return self.fence(output)


@dataclass(frozen=True)
class EncodedPrompt:
    ids: list[int]
    code_start: int | None = None  # tokens before the code to edit (RewritePrompt.code_at); None: unknown
    instruction_start: int | None = None  # tokens before the instruction (RewritePrompt.instruction_at)


class Rewriter:
    """Rewrites code with one loaded model; holds the decoder so costs learned carry across requests.

    An Engine (rewriter/engine.py); one request at a time, as the Decoder is not thread-safe.
    """

    concurrent = False
    ready = True

    def __init__(self, loaded: LoadedModel, decoder: Decoder | None = None, prefix_cache: bool = False,
                 draft: LoadedModel | None = None, prefix_cache_bytes: int = PREFIX_CACHE_BYTES):
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.decoder = decoder or Decoder(loaded.model, loaded.tokenizer, prefix_cache=prefix_cache,
                                          prefix_cache_bytes=prefix_cache_bytes,
                                          pass_costs=loaded.pass_costs())
        self.stop = fence_stop(self.tokenizer)  # a whole-file answer's end (no prefill, nothing to echo)
        # The last requests' branches, as far as decoded: a later try or a review's "try another"
        # asks for the same request's next branch, and greedy decoding would only repeat them.
        self.branched_requests: list[Branched] = []
        # A small model with the same tokenizer, drafting (argmax: exact for any sampling) where the file does not.
        self.draft = draft
        if draft is not None:
            from drafters.draft_model import check_same_tokenizer

            check_same_tokenizer(self.tokenizer, draft.tokenizer)

    @property
    def dtype(self) -> str:
        return self.loaded.dtype

    def encode_messages(self, messages: list[dict]) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        ids = encoded["input_ids"] if not isinstance(encoded, list) else encoded  # type: ignore[index]  # a BatchEncoding
        return list(ids)

    def encode_prompt(self, prompt: RewritePrompt) -> list[int]:
        """The prompt's tokens; a prefilled answer opening follows the assistant turn's header."""
        return self.encode(prompt).ids

    def encode(self, prompt: RewritePrompt) -> EncodedPrompt:
        """The prompt's tokens, and how many of them come before its code and its instruction
        (RewritePrompt.code_at, instruction_at), where the tokenizer can tell."""
        prefill = self.tokenizer.encode(prompt.prefill, add_special_tokens=False) if prompt.prefill else []
        if prompt.instruction_at is None or not getattr(self.tokenizer, "is_fast", False):
            return EncodedPrompt(self.encode_messages(prompt.messages) + prefill)
        encoded = self.tokenizer.apply_chat_template(prompt.messages, add_generation_prompt=True, return_dict=True,
                                                     tokenizer_kwargs={"return_offsets_mapping": True})
        text = self.tokenizer.apply_chat_template(prompt.messages, add_generation_prompt=True, tokenize=False)
        ids, offsets = list(encoded["input_ids"]), encoded["offset_mapping"]  # type: ignore[index, call-overload]  # a BatchEncoding
        message = str(text).find(prompt.messages[1]["content"])
        if message < 0:  # a template that rewrites the message
            return EncodedPrompt(ids + prefill)

        def tokens_before(chars: int | None) -> int | None:
            if chars is None:
                return None
            # The tokens that end before the offset: a token running across it is left out.
            return next((index for index, (_, end) in enumerate(offsets) if end > message + chars), len(ids))

        return EncodedPrompt(ids + prefill, tokens_before(prompt.code_at), tokens_before(prompt.instruction_at))

    def encode_prediction(self, prompt: RewritePrompt) -> list[int]:
        # The rest of the answer the model would write if it changed nothing (the prefill is the prompt's).
        return prediction_ids(self.tokenizer, prompt.prediction[len(prompt.prefill):])

    def drafter(self, prediction: list[int]) -> Drafter:
        if self.draft is None:
            return rewrite_drafter(prediction)
        small = model_drafter(self, self.draft, SamplingParams())
        return PredictionThenModelDrafter(rewrite_drafter(prediction), small)

    def completion_drafter(self, planned: PlannedCompletion) -> Drafter:
        """A raw completion's drafter: its prediction as a rewrite's is; without one, the span of
        the prompt its answer repeats; then the draft model, where there is one."""
        if planned.prediction is not None:
            return self.drafter(planned.prediction)
        if self.draft is None:
            return lookup_drafter(planned.prompt)
        return PredictionThenModelDrafter(lookup_drafter(planned.prompt),
                                          model_drafter(self, self.draft, SamplingParams()))

    def plan_completion(self, request: CompletionRequest) -> PlannedCompletion:
        """A raw completion's tokens and budget; ContextTooLarge when the prompt leaves no room."""
        return plan_completion(self.tokenizer, self.loaded.context_length, request)

    def complete(self, request: CompletionRequest,
                 planned: PlannedCompletion | None = None) -> Iterator[CompletionPiece]:
        """A raw completion's pieces as they are accepted (decoding/completion.py); `planned`: the
        request planned already (the service checks its limits first)."""
        planned = planned or self.plan_completion(request)
        verifier = make_verifier(request.sampling) if request.sampling is not None else None
        return decode_completion(self.decoder, self.completion_drafter(planned), planned, verifier)

    def plan(self, code: str, instruction: str, language: str = "", context: str | None = None,
             max_new_tokens: int | None = None) -> tuple[list[int], list[int], int]:
        """Prompt ids, prediction ids and the output budget, or RewriteError."""
        require_instruction(instruction)
        return self.fit(build_prompt(code, instruction, language, context), max_new_tokens)

    def fit(self, prompt: RewritePrompt, max_new_tokens: int | None) -> tuple[list[int], list[int], int]:
        """The prompt's and the prediction's ids and the output budget; ContextTooLarge when they do not fit."""
        encoded, prediction, budget = self._fit(prompt, max_new_tokens)
        return encoded.ids, prediction, budget

    def _fit(self, prompt: RewritePrompt, max_new_tokens: int | None) -> tuple[EncodedPrompt, list[int], int]:
        encoded = self.encode(prompt)
        prompt_ids = encoded.ids
        prediction = self.encode_prediction(prompt)
        room = self.loaded.context_length - len(prompt_ids)
        # An edit may grow the code; leave room for twice the prediction, and some more.
        wanted = max_new_tokens or 2 * len(prediction) + 256
        if room < len(prediction) + 16:
            raise ContextTooLarge(
                f"the code is too large for the model's context: the prompt takes {len(prompt_ids)} "
                f"tokens and the answer needs about {len(prediction)} more, but the model takes "
                f"{self.loaded.context_length} in all; rewrite a smaller part"
            )
        return encoded, prediction, min(wanted, room)

    def stream(self, request: EditRequest, *, drafter: Callable[[list[int]], Drafter] | None = None,
               verifier: Verifier | None = None,
               forced: Sequence[int] = ()) -> Generator[Progress | RewriteResult, None, None]:
        """Yield the answer's text as it settles (answer.AnswerStream), then the RewriteResult.

        The request's sampling (default greedy) picks the verifier; `drafter` maps the
        prediction's ids to the request's drafter (default: prediction plus prompt lookup);
        `verifier` overrides the one sampling picks (MJSD's, which changes the output);
        `forced`: the answer's first tokens, given rather than chosen (a branch).
        """
        require_instruction(request.instruction)
        answer = AnswerStream(request, prefilled=True)
        try:
            encoded, prediction, budget = self._fit(answer.prompt, request.max_new_tokens)
        except ContextTooLarge:
            if not request.conversation:
                raise
            # The earlier turns do not fit beside this one: ask for the change alone, as a new request.
            request = replace(request, conversation=())
            answer = AnswerStream(request, prefilled=True)
            encoded, prediction, budget = self._fit(answer.prompt, request.max_new_tokens)
        prompt = answer.prompt
        sampling = request.sampling
        verifier = verifier or (make_verifier(sampling) if sampling is not None else None)
        drafts = (drafter or self.drafter)(prediction)
        stop = AnswerEnd(self.tokenizer, prompt.prefill, prompt.echo_targets)
        stats = Stats()
        narrow_from = None  # a refine: the first turn's prompt, then what its answer's decoding computed
        if request.conversation:
            narrow_from = len(self.encode_prompt(first_turn(request.language, request.context, request.conversation)))
        for step in self.decoder.generate(encoded.ids, drafts, budget, stop, verifier=verifier,
                                          narrow_from=narrow_from, forced=forced):
            stats = step.stats
            settled = answer.feed(step.text)
            if settled:
                yield Progress(settled, stats)
        if stop.cut is not None:
            answer.echo_stopped(stop.cut, stop.dropped)
        yield from answer.finish(stats)

    def branches(self, request: EditRequest, count: int) -> Iterator[RewriteResult]:
        """Up to `count` further greedy answers to `request`, each branching from the greedy answer
        where the model came closest to another token (decoding/branches.py), closest first.

        The greedy answer is decoded again to see where the model hesitated: the prompt's cache is
        kept, and an answer that copies the prediction (why branches are asked for) takes few passes.
        Asked again for one of the last few requests, the branches decoded already are not decoded
        again (greedy decoding gives the same).
        """
        if request.sampling is not None and not request.sampling.greedy:
            raise ValueError("branches follow greedy decoding: leave the temperature at 0")
        branched = self._branched(request)
        for index, point in enumerate(branched.recorder.branch_points(branched.length, count, self.decoder.eos_ids)):
            if index == len(branched.decoded):
                branched.decoded.append(self._branch(request, branched.recorder, point))
            branch = branched.decoded[index]
            if branch is not None:
                yield branch

    def _branched(self, request: EditRequest) -> Branched:
        """The request's greedy answer as the recorder saw it, and its branches decoded so far."""
        for kept in self.branched_requests:
            if kept.request == request:
                self.branched_requests.remove(kept)
                self.branched_requests.append(kept)
                return kept
        recorder = HesitationRecorder()
        first = _result(self.stream(request, verifier=recorder))
        kept = Branched(request, recorder, first.stats.output_tokens)
        self.branched_requests = [*self.branched_requests[1 - BRANCHED_REQUESTS_KEPT:], kept]
        return kept

    def _branch(self, request: EditRequest, recorder: HesitationRecorder, point: Hesitation) -> RewriteResult | None:
        """The branch forcing `point`'s runner-up; None when it closed its code block before opening it."""
        follower = HesitationRecorder()  # verifies greedily too: it only adds the tokens' log-probabilities
        try:
            branch = _result(self.stream(request, forced=recorder.forced(point), verifier=follower))
        except NoCodeBlock:
            return None
        return replace(branch, mean_log_prob=mean_log_prob(point, follower, branch.stats.output_tokens))

    def prefill(self, request: EditRequest, stopped: Callable[[], bool] = lambda: False,
                code_known: bool = True) -> int:
        """Compute ahead what every request on `request`'s code and file shares whatever its
        instruction (with `code_known` false: on its file, whatever its code), as `stream` will use
        it; how many prompt tokens are now kept. Stops soon after `stopped()` says so, keeping what
        was done (Decoder.prefill); needs the prefix cache."""
        answer = AnswerStream(request, prefilled=True)
        encoded = self.encode(answer.prompt)
        end = encoded.instruction_start if code_known else encoded.code_start
        if end is None or self.decoder.prefix_cache is None:
            return 0
        return self.decoder.prefill(encoded.ids[:end], stopped=stopped)

    def complete_prompt(self, prompt: NextEditPrompt, max_new_tokens: int | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> Completion:
        """A rendered prompt's greedy answer, its prediction the draft (decoding/rendered.py)."""
        from .rendered import complete

        return complete(self, prompt, max_new_tokens, stopped)

    def prefill_prompt(self, prompt: NextEditPrompt, stopped: Callable[[], bool] = lambda: False) -> int:
        """Compute a rendered prompt's stable part ahead; how many of its tokens are kept."""
        from .rendered import prefill_stable

        return prefill_stable(self, prompt, stopped)

    def rewrite(self, code: str, instruction: str, language: str = "", context: str | None = None,
                max_new_tokens: int | None = None, sampling: SamplingParams | None = None,
                conversation: tuple[Turn, ...] = (), **decoding) -> RewriteResult:
        """The whole result of one request (scripts and benchmarks; front ends stream)."""
        request = EditRequest(code, instruction, language, context, max_new_tokens, sampling, conversation)
        return _result(self.stream(request, **decoding))

    def load(self, say: Callable[[str], None]) -> None:
        """Loaded already (the Engine interface)."""

    def close(self) -> None:
        """Nothing to free: the model stays loaded for whoever holds it."""


def _result(events: Iterator[Progress | RewriteResult]) -> RewriteResult:
    """The result at the end of a stream."""
    for event in events:
        if isinstance(event, RewriteResult):
            return event
    raise AssertionError("stream ended without a result")
