"""A model whose answers a test chooses, behind the real Rewriter's interface.

`ScriptedRewriter(rewriter, edit)` plans like the real `rewriter` (its tokenizer, its context
length, its budget) and answers each request with `edit(code)` in one fenced block, written
token by token with the real tokenizer and cut at the budget (finish reason "length") as a model
would be. The CLI (`rewriter apply`) and the service (`/v1/rewrites`) run on it unchanged.
"""
from __future__ import annotations

from rewriter.prompt import SourceText, build_prompt, extract_code
from rewriter.results import Progress, RewriteResult, Stats


class ScriptedRewriter:
    def __init__(self, rewriter, edit=lambda code: code):
        self.rewriter = rewriter
        self.tokenizer = rewriter.tokenizer
        self.loaded = rewriter.loaded
        self.edit = edit
        self.requests: list[dict] = []  # what each request sent: code, language, context, budget

    def plan(self, code, instruction, language="", context=None, max_new_tokens=None):
        return self.rewriter.plan(code, instruction, language, context, max_new_tokens)

    def stream(self, request, **decoding):
        text, instruction, language, context, max_new_tokens = (
            request.code, request.instruction, request.language, request.context, request.max_new_tokens)
        source = SourceText.from_text(text)
        _, _, budget = self.plan(source.code, instruction, language, context, max_new_tokens)
        self.requests.append({"code": source.code, "language": language, "context": context, "budget": budget})
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
