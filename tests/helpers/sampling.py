"""Exact output distributions and a chi-square test for the sampling verifiers."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch

from drafters.base import Draft
from rewriter.decoding.verify import LogitsShaper
from tests.helpers.models import tiny_model

VOCAB = 8
LENGTH = 3
PROMPT = [3, 1, 4, 1, 5]
ALPHA = 1e-3
TARGET_SEED = 7


def peaky_model(seed: int, sharpness: float = 3.0):
    """A tiny random model whose next-token distributions are uneven, like a real model's."""
    model = tiny_model(seed=seed, vocab_size=VOCAB, hidden=32)
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    model.generation_config.eos_token_id = None
    return model


def logits_table(model, prompt=PROMPT, depth=LENGTH) -> dict[tuple, torch.Tensor]:
    """The model's logits after the prompt and every continuation shorter than `depth`."""
    table = {}
    for length in range(depth):
        prefixes = list(itertools.product(range(VOCAB), repeat=length))
        ids = torch.tensor([prompt + list(prefix) for prefix in prefixes])
        with torch.inference_mode():
            rows = model(input_ids=ids).logits[:, -1].float()
        table.update(zip(prefixes, rows))
    return table


def exact_distribution(table, shape: LogitsShaper, length=LENGTH) -> dict[tuple, float]:
    probs = {prefix: shape.probs(row) for prefix, row in table.items()}
    exact = {}
    for sequence in itertools.product(range(VOCAB), repeat=length):
        chance = 1.0
        for i in range(length):
            chance *= float(probs[sequence[:i]][sequence[i]])
        exact[sequence] = chance
    return exact


def chi_square_p_value(counts: Counter, exact: dict[tuple, float]) -> float:
    total = sum(counts.values())
    assert sum(counts[s] for s in exact) == total, "a sample outside the enumerated outcomes"
    statistic, cells, pooled_observed, pooled_expected = 0.0, 0, 0, 0.0
    for sequence, chance in exact.items():
        expected = chance * total
        if expected < 5:
            pooled_observed += counts[sequence]
            pooled_expected += expected
            continue
        statistic += (counts[sequence] - expected) ** 2 / expected
        cells += 1
    if pooled_expected > 0:
        statistic += (pooled_observed - pooled_expected) ** 2 / pooled_expected
        cells += 1
    degrees = torch.tensor((cells - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(degrees, torch.tensor(statistic / 2, dtype=torch.float64)))


class DraftSource:
    """Drafts for one step after the prompt: one-hot (fixed tokens) or sampled from a draft model."""

    def __init__(self, kind: str, shape: LogitsShaper, generator: torch.Generator, length: int = 2,
                 target_seed: int = TARGET_SEED):
        self.kind = kind
        self.length = length
        self.generator = generator
        self.shape = shape
        # The draft model: the target seen through noise, as a small model of the same family.
        noise = torch.Generator().manual_seed(99)
        target = logits_table(peaky_model(seed=target_seed), depth=length + 1)
        self.q = {prefix: shape.probs(row + torch.randn(row.shape, generator=noise)) for prefix, row in target.items()}
        # A fixed one-hot draft: the draft model's most likely path.
        path: tuple = ()
        for _ in range(length):
            path += (int(self.q[path].argmax()),)
        self.path = list(path)

    def __call__(self) -> Draft:
        if self.kind == "one-hot":
            return Draft(list(self.path), acceptance=0.5, source="prediction")
        tokens, rows = [], []
        # One row more than is verified: the loop may cut a draft after the drafter made it.
        for _ in range(self.length + 1):
            row = self.q[tuple(tokens)]
            rows.append(row)
            tokens.append(int(torch.multinomial(row, 1, generator=self.generator)))
        draft = Draft(tokens, acceptance=0.5, source="draft_model", probs=torch.stack(rows))
        draft.tokens = draft.tokens[: self.length]
        return draft


def sample_with_verifier(verifier, table, shape, drafts: DraftSource, trials: int,
                         generator: torch.Generator) -> tuple[Counter, float]:
    """Continuations of LENGTH tokens: one verified step with a draft, then plain sampling."""
    counts: Counter = Counter()
    accepted_total = 0
    target = {prefix: shape.probs(row) for prefix, row in table.items()}
    for _ in range(trials):
        draft = drafts()
        logits = torch.stack([table[tuple(draft.tokens[:i])] for i in range(len(draft.tokens) + 1)])
        accepted, following = verifier.verify(logits, draft)
        assert 0 <= accepted <= len(draft.tokens)
        accepted_total += accepted
        sequence = draft.tokens[:accepted] + [following]
        while len(sequence) < LENGTH:
            row = target[tuple(sequence)]
            sequence.append(int(torch.multinomial(row, 1, generator=generator)))
        counts[tuple(sequence[:LENGTH])] += 1
    return counts, accepted_total / trials


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Tiny tensors: a second thread only adds waits (badly so on a busy machine).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
