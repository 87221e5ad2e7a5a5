"""A model whose answers a test chooses, behind the real Rewriter's interface.

`ScriptedRewriter(rewriter, edit)` plans like the real `rewriter` (its tokenizer, its context
length, its budget) and answers each request with `edit(code)` in one fenced block, written
token by token with the real tokenizer and cut at the budget (finish reason "length") as a model
would be. The CLI (`rewriter apply`) and the service (`/v1/rewrites`) run on it unchanged.

`ScriptedDecoder(tokenizer, answer)` stands in for the real Rewriter's decoder instead: the
Rewriter's own stream (stop checks, echo cut, result) runs on an answer the test chose.
"""
from __future__ import annotations

from rewriter.answer import extract_code
from rewriter.prompt import SourceText, build_prompt
from rewriter.results import Progress, RewriteResult, Stats


class ScriptedRewriter:
    def __init__(self, rewriter, edit=lambda code: code):
        self.rewriter = rewriter
        self.tokenizer = rewriter.tokenizer
        self.loaded = rewriter.loaded
        self.edit = edit
        self.requests: list[dict] = []  # what each request sent: code, language, context, budget, conversation

    def plan(self, code, instruction, language="", context=None, max_new_tokens=None):
        return self.rewriter.plan(code, instruction, language, context, max_new_tokens)

    def stream(self, request, **decoding):
        text, instruction, language, context, max_new_tokens = (
            request.code, request.instruction, request.language, request.context, request.max_new_tokens)
        source = SourceText.from_text(text)
        _, _, budget = self.plan(source.code, instruction, language, context, max_new_tokens)
        self.requests.append({"code": source.code, "language": language, "context": context, "budget": budget,
                              "conversation": request.conversation})
        answer = build_prompt(self.edit(source.code), instruction, language, context).prediction + "\n"
        ids = self.tokenizer.encode(answer, add_special_tokens=False)
        written = ids[:budget]
        stats = Stats(finish_reason="length" if len(ids) > budget else "stop")
        sent = ""
        for count in range(1, len(written) + 1):
            text_so_far = self.tokenizer.decode(written[:count], skip_special_tokens=True)
            stats.output_tokens = count
            if len(text_so_far) > len(sent):
                yield Progress(text_so_far[len(sent):], stats)
                sent = text_so_far
        yield RewriteResult(text=source.restore(extract_code(sent)), answer=sent, stats=stats)

    def __getattr__(self, name):  # the rest (encode_prompt, decoder, ...) is the real rewriter's
        return getattr(self.rewriter, name)


class ScriptedDecoder:
    """Writes a fixed answer a token a step, stopping as the real decoder does (stop check, eos)."""

    def __init__(self, tokenizer, answer: str):
        self.tokenizer = tokenizer
        self.ids = tokenizer.encode(answer, add_special_tokens=False) + [tokenizer.eos_token_id]
        self.asked: list[tuple[list[int], int | None]] = []  # each request's prompt and its narrow_from

    def generate(self, prompt, drafter, max_new_tokens, stop=None, verifier=None, narrow_from=None, forced=()):
        """`forced` (a branch) changes nothing: the scripted answer is all this model ever writes,
        so a branch of an unchanged answer comes back unchanged too."""
        from rewriter.decoding.decode import Step  # brings in torch: only when a test decodes

        self.asked.append((list(prompt), narrow_from))

        output, sent = [], 0
        for token in self.ids:
            output.append(token)
            keep = len(output) if token == self.tokenizer.eos_token_id else stop(output)
            if keep is not None:
                del output[keep:]
            text = self.tokenizer.decode(output, skip_special_tokens=True)
            stats = Stats(output_tokens=len(output), finish_reason="stop" if keep is not None else "")
            yield Step(tokens=output[sent:], text=text[min(sent, len(text)):], stats=stats, done=keep is not None)
            sent = max(sent, len(text))
            if keep is not None:
                return
