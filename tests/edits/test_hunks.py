import random

from rewriter.edits.hunks import Hunk, HunkStream, apply_hunks


def stream_all(original: str, new: str, chunk_sizes) -> list[Hunk]:
    stream, hunks, cut = HunkStream(original), [], 0
    for size in chunk_sizes:
        cut = min(len(new), cut + size)
        hunks += stream.feed(new[:cut])
    return hunks + stream.feed(new, final=True)


def test_a_change_settles_once_the_output_rejoins_the_original():
    original = "def f():\n    a = 1\n    b = 2\n    c = 3\n    return a\n"
    new = "def f():\n    a = 10\n    b = 2\n    c = 3\n    return a\n"
    stream = HunkStream(original)
    assert stream.feed("def f():\n    a = 10\n") == []  # the edit may go on
    assert stream.feed("def f():\n    a = 10\n    b = 2\n    c = 3\n") == [Hunk(1, 2, ("    a = 10\n",))]
    assert stream.feed(new, final=True) == []


def test_hunks_always_compose_to_the_final_text():
    rng = random.Random(7)
    words = ["alpha = 1", "beta()", "", "}", "return x", "    pass", "x += 1"]
    for _ in range(2000):
        original = [rng.choice(words) + "\n" for _ in range(rng.randrange(0, 14))]
        new = list(original)
        for _ in range(rng.randrange(0, 4)):
            where = rng.randrange(0, len(new) + 1)
            kind = rng.randrange(3)
            if kind == 0:
                new.insert(where, rng.choice(words) + " # new\n")
            elif where < len(new):
                if kind == 1:
                    del new[where]
                else:
                    new[where] = rng.choice(words) + " # changed\n"
        old_text, new_text = "".join(original), "".join(new)
        if new_text and rng.random() < 0.3:
            new_text = new_text[:-1]  # no final newline
        chunks = [rng.randrange(1, 15) for _ in range(len(new_text) + 1)]
        assert apply_hunks(old_text, stream_all(old_text, new_text, chunks)) == new_text


def test_apply_hunks_refuses_overlapping_hunks():
    import pytest

    with pytest.raises(ValueError):
        apply_hunks("a\nb\nc\n", [Hunk(1, 2, ("x\n",)), Hunk(0, 1, ("y\n",))])
