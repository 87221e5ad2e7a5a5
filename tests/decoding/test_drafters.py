from drafters import CombinedDrafter, Draft, PredictionDrafter, PromptLookupDrafter

PROMPT = [900, 901, 902]


def propose(drafter, output, limit=8):
    return drafter.propose(PROMPT + output, len(PROMPT), limit)


def test_drafts_from_the_cursor_while_the_output_follows_the_prediction():
    drafter = PredictionDrafter([1, 2, 3, 4, 5, 6])
    assert propose(drafter, [], 3).tokens == [1, 2, 3]
    assert propose(drafter, [1, 2], 3).tokens == [3, 4, 5]
    assert propose(drafter, [1, 2, 3, 4, 5, 6]) is None  # nothing left to offer


def test_resumes_right_after_a_replacement():
    prediction = [10, 11, 12, 13, 14, 15, 16, 17]
    drafter = PredictionDrafter(prediction)
    propose(drafter, [10, 11])
    # 12 was replaced by 50, 51; the first token after the edit realigns the cursor.
    assert propose(drafter, [10, 11, 50, 51]) is None  # 50, 51 occur nowhere in the prediction
    assert propose(drafter, [10, 11, 50, 51, 13]).tokens[:3] == [14, 15, 16]


def test_resumes_after_a_deletion_and_an_insertion():
    prediction = list(range(20, 40))
    drafter = PredictionDrafter(prediction)
    assert propose(drafter, [20, 21, 22, 30], 4).tokens == [31, 32, 33, 34]  # 23..29 deleted
    drafter = PredictionDrafter(prediction)
    assert propose(drafter, [20, 21, 77, 78, 22], 3).tokens == [23, 24, 25]  # 77, 78 inserted


def test_repeated_lines_rejoin_at_the_occurrence_after_the_edit():
    line = [7, 8, 9, 0]  # the same line three times
    prediction = [1] + line + [2] + line + [3] + line + [4]
    drafter = PredictionDrafter(prediction)
    edited_start = [1] + line + [2] + line  # follows up to the second line
    propose(drafter, edited_start)
    # The output replaces token 3 with 55, then repeats the line: the third copy follows.
    draft = propose(drafter, edited_start + [55] + line)
    assert draft.tokens == [4]


def test_a_failed_realignment_does_not_move_the_departure_point():
    prediction = [5, 1, 2, 3, 6, 7, 1, 2, 3, 8, 9]
    drafter = PredictionDrafter(prediction)
    propose(drafter, [5, 1, 2, 3])
    propose(drafter, [5, 1, 2, 3, 40, 7])  # false match on 7 (position 5)
    # The next token disagrees with the false match; the departure point stays at 4.
    assert drafter.departure == 4
    draft = propose(drafter, [5, 1, 2, 3, 40, 7, 41, 1, 2, 3])
    assert draft.tokens[:2] == [8, 9]


def test_acceptance_estimate_grows_with_the_matched_run():
    drafter = PredictionDrafter(list(range(100)))
    early = propose(drafter, [0]).acceptance
    late = propose(drafter, list(range(60))).acceptance
    assert 0.5 < early < late < 1
    weak = PredictionDrafter([1, 2, 3, 4, 5, 6])
    propose(weak, [9])  # unaligned from the start
    assert propose(weak, [9, 3]).acceptance <= 0.5  # a 1-gram realignment is weak evidence


def test_prompt_lookup_drafts_what_followed_the_latest_occurrence():
    drafter = PromptLookupDrafter(max_ngram=3)
    tokens = [1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 6, 7, 0, 2, 3]
    draft = drafter.propose(tokens, 0, 3)
    assert draft.tokens == [6, 7, 0]  # the latest "2 3" is followed by 6 7 0
    assert drafter.propose([1, 2, 3], 0, 3) is None  # the tail itself is not a match


def test_prompt_lookup_acceptance_follows_its_record():
    drafter = PromptLookupDrafter()
    tokens = [1, 2, 3, 4, 1, 2, 3]
    first = drafter.propose(tokens, 0, 4)
    drafter.feedback(first, 0)
    drafter.feedback(first, 0)
    assert drafter.propose(tokens, 0, 4).acceptance < first.acceptance


class Fixed:
    def __init__(self, name, acceptance):
        self.name, self.acceptance, self.heard = name, acceptance, []

    def propose(self, tokens, prompt_length, limit):
        return Draft([1, 2], self.acceptance, self.name) if self.acceptance else None

    def feedback(self, draft, accepted):
        self.heard.append(accepted)


def test_combined_takes_the_likeliest_proposal_and_reports_to_its_owner():
    low, high, silent = Fixed("low", 0.3), Fixed("high", 0.9), Fixed("silent", 0)
    combined = CombinedDrafter(low, high, silent)
    draft = combined.propose([0], 0, 4)
    assert draft.source == "high"
    combined.feedback(draft, 1)
    assert high.heard == [1] and low.heard == []


def test_the_prompt_span_drafter_waits_for_the_answer_to_reach_the_span_it_repeats():
    from drafters import PromptSpanDrafter

    prompt = [50, 51, 60, 61, 62, 63, 64, 65, 52]  # a header, the window 60..65, a footer
    drafter = PromptSpanDrafter(prompt)
    assert drafter.propose(prompt, len(prompt), 4) is None  # no output yet: the answer's start is unknown
    assert drafter.propose(prompt + [70], len(prompt), 4) is None  # 70 occurs nowhere in the prompt
    draft = drafter.propose(prompt + [70, 60, 61], len(prompt), 3)
    assert draft.tokens == [62, 63, 64] and draft.source == "prompt_span"


def test_the_prompt_span_drafter_follows_the_copy_past_a_repeated_line_where_prompt_lookup_does_not():
    from drafters import PromptSpanDrafter

    line = [7, 8, 9]
    window = [1] + line + [2] + line + [3, 4]
    prompt = [90, 91] + window + [92]
    # The answer copied the window up to the second copy of the line.
    output = [1] + line + [2] + line
    span = PromptSpanDrafter(prompt)
    for end in range(1, len(output) + 1):  # the decoder asks after every step
        draft = span.propose(prompt + output[:end], len(prompt), 2)
    assert draft.tokens == [3, 4]
    lookup = PromptLookupDrafter(max_ngram=3).propose(prompt + output, len(prompt), 2)
    assert lookup.tokens != [3, 4]  # its latest "7 8 9" is the answer's own, followed by nothing new
