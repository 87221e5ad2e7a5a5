import pytest

from rewriter.lookahead import Lookahead, expected_tokens


def test_expected_tokens_counts_the_models_own_token():
    assert expected_tokens(0.0, 10) == 1.0
    assert expected_tokens(1.0, 10) == 11.0
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_unlikely_drafts_are_not_worth_a_wider_pass_on_a_cpu():
    # On a CPU a 2-token pass costs ~1.5x a 1-token pass: a coin-flip draft does not pay.
    assert Lookahead("cpu").window(0.3, 64) == 0


def test_likely_drafts_get_a_wide_window_capped_by_what_is_available():
    cpu = Lookahead("cpu")
    assert cpu.window(0.99, 500) >= 63
    assert cpu.window(0.99, 7) == 7
    # 10 tokens would take a 16-token pass, which costs much more than an 8-token one here.
    assert cpu.window(0.99, 10) == 7
    assert cpu.window(0.99, 0) == 0


def test_window_grows_with_acceptance():
    cpu = Lookahead("cpu")
    windows = [cpu.window(a, 500) for a in (0.3, 0.6, 0.8, 0.9, 0.95, 0.99)]
    assert windows == sorted(windows)
    assert windows[0] < windows[-1]


def test_measured_costs_override_the_prior():
    flat = Lookahead("cpu")
    for size in (1, 2, 4, 8, 16, 32, 64, 128):
        flat.record(size, 0.1)  # this device: every pass costs the same
    assert flat.window(0.6, 500) > Lookahead("cpu").window(0.6, 500)


def test_a_gpu_speculates_where_a_cpu_would_not():
    assert Lookahead("cuda").window(0.3, 64) > 0 == Lookahead("cpu").window(0.3, 64)


def test_unmeasured_sizes_follow_the_scale_of_measured_ones():
    lookahead = Lookahead("cpu")
    lookahead.record(1, 0.2)  # twice the prior's unit
    assert lookahead.cost(64) == pytest.approx(2 * 0.2 * 4.0 / 2, rel=0.01)


def test_costs_are_kept_per_band_of_context_length():
    # A wide pass's attention grows with the context: costs from a long file must not size the
    # windows of a short selection, nor the other way round.
    lookahead = Lookahead("cpu")
    for size in (1, 2, 4, 8, 16, 32, 64, 128):
        lookahead.record(size, 0.01 * size, context=2500)  # dear wide passes after 2,500 tokens
        lookahead.record(size, 0.01, context=300)  # every pass alike after 300
    assert lookahead.cost(128, 300) == pytest.approx(0.01)
    assert lookahead.cost(128, 2500) == pytest.approx(1.28)
    assert lookahead.window(0.9, 500, context=300) > lookahead.window(0.9, 500, context=2500)
    # A band not measured yet takes the nearest band's costs.
    assert lookahead.cost(128, 6000) == pytest.approx(1.28)


def test_a_wide_pass_measured_under_load_does_not_keep_drafts_off_for_good():
    # Wide passes timed while another process held the core: plain steps look best for now, but
    # the best draft length is tried again after PLAIN_STEPS of them, and its new measurement (a
    # quiet core) brings drafting back.
    from rewriter.lookahead import PLAIN_STEPS

    lookahead = Lookahead("cpu")
    lookahead.record(1, 0.1)
    for size in (8, 16, 32, 64):
        lookahead.record(size, 60.0)  # 600x a one-token pass: stale measurements
    windows = [lookahead.window(0.99, 63) for _ in range(PLAIN_STEPS + 1)]
    assert windows[:PLAIN_STEPS] == [0] * PLAIN_STEPS and windows[-1] > 0
    lookahead.record(windows[-1] + 1, 0.12)  # the tried pass, on a quiet core
    assert lookahead.window(0.99, 63) > 0


def test_drafts_that_do_not_pay_stay_off_but_for_the_rare_try():
    lookahead = Lookahead("cpu")
    from rewriter.lookahead import PLAIN_STEPS

    windows = [lookahead.window(0.1, 64) for _ in range(3 * (PLAIN_STEPS + 1))]
    assert windows.count(0) == len(windows) - 3 and all(w <= 1 for w in windows)
    assert lookahead.window(0.9, 0) == 0  # nothing at hand: nothing to try
