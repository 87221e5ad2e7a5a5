"""The blind rules that choose among candidate answers: each picks what it says, ties to the earlier."""
from rewriter.edits.candidate_rules import Candidate, agreed, closest, likeliest


def test_closest_takes_the_first_likeliest_the_best_scored_agreed_the_most_given():
    candidates = [Candidate("a", -2.0), Candidate("b", -0.5), Candidate("c", -1.0), Candidate("c", -3.0)]
    assert (closest(candidates), likeliest(candidates), agreed(candidates)) == (0, 1, 2)


def test_ties_go_to_the_earlier_candidate_and_an_unscored_one_comes_last():
    assert likeliest([Candidate("a", None), Candidate("b", -1.0), Candidate("c", -1.0)]) == 1
    assert agreed([Candidate("a", None), Candidate("b", None)]) == 0
