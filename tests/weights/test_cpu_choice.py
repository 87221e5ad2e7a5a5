"""`--dtype auto` on a CPU: the choice by measured pass costs, remembered per CPU, torch and model,
and the int8 weights kept in the cache. Pass costs are injected: no test depends on this machine."""
import json
import time

import pytest
import torch

from rewriter.decoding.decode import Decoder
from rewriter.weights import attention, cpu_choice, int8_kernels, models, path_timing, quantize
from rewriter.weights.cpu_choice import (
    CANDIDATES,
    Choice,
    EditProfile,
    choose,
    choose_for,
    describe,
    expected_edit_seconds,
    pass_cost_curve,
)
from rewriter.weights.models import load_model
from rewriter.weights.path_timing import measure_candidates
from rewriter.weights.quantize import INT8_KINDS, int8_kind
from tests.helpers.models import tiny_model

# Full passes of the 0.5B model, seconds at 1 / 16 / 64 tokens.
# An AVX2-only CPU (issue 15): _int_mm takes a slow fallback, int8-bf16 is cheap when narrow.
AVX2 = {"float32": {1: 0.153, 16: 0.440, 64: 0.916}, "int8": {1: 1.10, 16: 1.30, 64: 3.40},
        "int8-bf16": {1: 0.063, 16: 0.284, 64: 0.991}}
# A CPU with VNNI (docs/benchmarks.md): int8 is fastest at every width.
VNNI = {"float32": {1: 0.093, 16: 0.207, 64: 0.406}, "int8": {1: 0.039, 16: 0.076, 64: 0.171},
        "int8-bf16": {1: 0.050, 16: 0.200, 64: 0.700}}


def _on_cpu(monkeypatch, name_and_flags):
    """This CPU, as both the choice (its identity) and the timing (its known path) read it."""
    for module in (cpu_choice, path_timing):
        monkeypatch.setattr(module, "cpu_name_and_flags", name_and_flags)


@pytest.fixture(autouse=True)
def cpu_of_no_known_kind(monkeypatch):
    """The choice as the timings alone make it: tests of a CPU of a known kind say so (x86_avx2)."""
    _on_cpu(monkeypatch, lambda: ("a CPU of no known kind", set()))
    monkeypatch.setattr(cpu_choice, "others_running", lambda: 0)  # a quiet machine, whatever runs beside the tests


def test_a_slow_int8_product_is_not_chosen():
    assert choose(AVX2) == "int8-bf16"


def test_fast_int8_products_are_chosen():
    assert choose(VNNI) == "int8"


def test_a_path_slower_than_float32_at_every_width_is_never_chosen():
    costs = {"float32": {1: 0.10, 16: 0.20, 64: 0.40}, "int8": {1: 0.101, 16: 0.201, 64: 0.401}}
    assert choose(costs) == "float32"
    # ...even for an edit that is all new code, where only one-token passes count.
    assert choose(costs, EditProfile(prompt_tokens=0, copied_tokens=0, new_tokens=100)) == "float32"


def test_a_path_given_up_on_part_way_is_not_chosen_and_shows_as_unmeasured():
    costs = {"float32": AVX2["float32"], "int8": {1: 1.10}, "int8-bf16": AVX2["int8-bf16"]}
    assert choose(costs) == "int8-bf16"
    assert choose({"float32": AVX2["float32"], "int8": {1: 0.01}}) == "float32"
    assert "int8 1100/-/-" in describe("int8-bf16", costs)


def test_a_far_slower_path_is_not_timed_wider(monkeypatch):
    slow_int_mm = torch._int_mm

    def slow(a, b):
        time.sleep(0.02)
        return slow_int_mm(a, b)

    monkeypatch.setattr(quantize.torch, "_int_mm", slow)
    costs = measure_candidates(tiny_model(seed=5), widths=(1, 4), context_tokens=4, prompt_tokens=12, repeats=1)
    assert set(costs["int8"]) == {1} and set(costs["float32"]) == {1, 4, 12}  # nor given a prompt
    assert choose(costs) != "int8"


def test_the_choice_weighs_narrow_passes_against_wide_ones():
    # Cheap narrow passes, dear wide ones: worth it for new code, not for a long copied file.
    costs = {"float32": {1: 0.15, 16: 0.30, 64: 0.60}, "int8-bf16": {1: 0.06, 16: 0.40, 64: 1.60}}
    assert choose(costs, EditProfile(prompt_tokens=200, copied_tokens=50, new_tokens=100)) == "int8-bf16"
    assert choose(costs, EditProfile(prompt_tokens=4000, copied_tokens=2000, new_tokens=5)) == "float32"


def test_a_timed_prompt_prices_the_prefill_and_the_widest_passes():
    # Measured on an AVX2 imitation (docs/benchmarks.md): float32 products grow more efficient with the rows,
    # int8-bf16's do not. There ours ran the NoFunEval cases faster in float32 (7-10 s a case
    # against 10-12 s); from the 1/16/64 costs alone, extrapolated, int8-bf16 looked cheaper.
    timed = {"float32": {1: 0.187, 16: 0.392, 64: 0.771, 512: 3.008},
             "int8-bf16": {1: 0.077, 16: 0.305, 64: 0.954, 512: 4.363}}
    narrow = {name: {w: t for w, t in measured.items() if w <= 64} for name, measured in timed.items()}
    assert choose(narrow) == "int8-bf16"
    assert choose(timed) == "float32"
    # An edit that writes much new code (one pass a token) is another matter.
    assert choose(timed, EditProfile(new_tokens=60)) == "int8-bf16"
    assert pass_cost_curve(timed["float32"])[128] == pytest.approx(0.771 + (3.008 - 0.771) * 64 / 448)


def test_expected_seconds_follow_the_pass_costs():
    measured = {**AVX2["float32"], 512: 5.4}  # as auto times them: a 512-token prompt too
    base = expected_edit_seconds(measured)
    for width in (1, 16, 64, 512):
        dearer = {**measured, width: measured[width] * 2}
        # One-token passes (new code) and wide ones (the prompt, copied code) always count.
        assert expected_edit_seconds(dearer) >= base if width == 16 else expected_edit_seconds(dearer) > base, width


def test_pass_cost_curve_is_linear_between_measured_widths():
    curve = pass_cost_curve({1: 1.0, 16: 4.0, 64: 10.0})
    assert curve[1] == 1.0 and curve[16] == 4.0 and curve[64] == 10.0
    assert curve[8] == pytest.approx(1.0 + 3.0 * 7 / 15)
    assert curve[128] == pytest.approx(10.0 + 6.0 * 64 / 48)


def test_one_line_says_what_was_chosen_and_the_costs():
    line = describe("int8-bf16", AVX2)
    assert "\n" not in line and line.startswith("dtype auto: int8-bf16")
    assert "float32 153/440/916" in line and "int8 1100/1300/3400" in line and "1/16/64 tokens" in line


class Counting:
    def __init__(self, costs, spread=1.05):
        self.costs, self.calls, self.spread = costs, 0, spread

    def __call__(self, model, candidates=cpu_choice.CANDIDATES, say=None, spread=None, made=None):
        self.calls += 1
        self.timed = tuple(candidates)
        costs = {kind: measured for kind, measured in self.costs.items() if kind in candidates}
        if spread is not None:
            spread.update({kind: {width: self.spread for width in measured} for kind, measured in costs.items()})
        return costs


def test_a_choice_timed_on_a_busy_machine_is_used_but_not_kept(tmp_path):
    said = []
    assert choose_for(None, "m", tmp_path, say=said.append, measure=Counting(VNNI, spread=2.5)).dtype == "int8"
    assert any("varied up to 2.5x" in line and "next start measures the same" in line for line in said)
    measure = Counting(VNNI)
    assert not choose_for(None, "m", tmp_path, measure=measure).cached and measure.calls == 1
    assert choose_for(None, "m", tmp_path, measure=Counting(AVX2)).cached  # steady timings are kept


def test_a_busy_machine_keeps_the_choice_once_two_starts_agree(tmp_path):
    said = []
    assert choose_for(None, "m", tmp_path, measure=Counting(AVX2, spread=1.8)).dtype == "int8-bf16"
    # A different answer under load: still not kept.
    assert choose_for(None, "m", tmp_path, measure=Counting(VNNI, spread=1.8)).dtype == "int8"
    again = Counting(VNNI, spread=1.8)
    assert not choose_for(None, "m", tmp_path, say=said.append, measure=again).cached and again.calls == 1
    assert any("chose int8 too; the choice is kept" in line for line in said)
    later = Counting(AVX2)
    kept = choose_for(None, "m", tmp_path, measure=later)
    assert kept.dtype == "int8" and kept.cached and later.calls == 0


def test_a_choice_kept_on_a_busy_machine_keeps_each_pass_s_faster_timing(tmp_path):
    # The costs become the window policy's prior: a pass slowed by other work in one start
    # (a 64-token pass at 6x a 16-token one) must not make wide passes look dear for good.
    slowed = {kind: {**measured, 64: measured[64] * 6} for kind, measured in VNNI.items()}
    choose_for(None, "m", tmp_path, measure=Counting(VNNI, spread=1.8))
    choose_for(None, "m", tmp_path, measure=Counting(slowed, spread=1.8))
    kept = choose_for(None, "m", tmp_path, measure=Counting(AVX2))
    assert kept.cached and kept.costs == VNNI


# An x86 CPU with AVX2 where FBGEMM's int8 is the fastest (as on every one timed quiet so far);
# under load the int8 path's 16-token pass took 7.4 s once and seemed fastest at the other widths.
FBGEMM_FASTEST = {**VNNI, "int8": {1: 0.045, 16: 0.090, 64: 0.190},
                  "int8-fbgemm": {1: 0.040, 16: 0.080, 64: 0.180}}
BUSY_TIMINGS = {**FBGEMM_FASTEST, "int8": {1: 0.020, 16: 0.040, 64: 0.090},
                "int8-fbgemm": {1: 0.060, 16: 0.200, 64: 0.400}}


@pytest.fixture
def x86_avx2(monkeypatch):
    _on_cpu(monkeypatch, lambda: ("an x86 CPU", {"avx2", "fma", "avx512f"}))


def test_a_cpu_of_a_known_kind_times_its_known_path_against_float32_alone(tmp_path, x86_avx2):
    said = []
    measure = Counting(BUSY_TIMINGS)
    assert choose_for(None, "m", tmp_path, say=said.append, measure=measure).dtype == "int8-fbgemm"
    assert measure.timed == ("float32", "int8-fbgemm")  # int8 looked fastest, but is not timed here
    assert any("timing float32, int8-fbgemm passes" in line for line in said)


def test_on_a_busy_machine_the_path_known_fastest_for_the_cpu_is_kept_whatever_the_timings_say(tmp_path, x86_avx2):
    said = []
    float32_fastest_when_busy = {**FBGEMM_FASTEST, "float32": {1: 0.020, 16: 0.040, 64: 0.090}}
    busy = Counting(float32_fastest_when_busy, spread=2.1)
    assert choose_for(None, "m", tmp_path, say=said.append, measure=busy).dtype == "int8-fbgemm"
    assert any("varied up to 2.1x" in line and "named float32" in line and "int8-fbgemm" in line for line in said)
    later = Counting(VNNI)
    kept = choose_for(None, "m", tmp_path, measure=later)
    assert kept.dtype == "int8-fbgemm" and kept.cached and later.calls == 0  # no timing again at the next start


def test_timings_taken_while_other_work_ran_never_replace_the_known_path(tmp_path, x86_avx2, monkeypatch):
    float32_clearly_faster = {**FBGEMM_FASTEST, "float32": {1: 0.010, 16: 0.020, 64: 0.045}}
    monkeypatch.setattr(cpu_choice, "others_running", lambda: 1)
    said = []
    steady_but_busy = Counting(float32_clearly_faster)  # repeats agree: the load was even
    assert choose_for(None, "m", tmp_path, say=said.append, measure=steady_but_busy).dtype == "int8-fbgemm"
    assert any("other work ran beside the timing" in line and "named float32" in line for line in said)


def test_the_known_path_is_timed_at_every_width_however_slow_a_pass_of_it_looked(x86_avx2):
    slowed_once = {("float32", 1): 0.1, ("int8-fbgemm", 1): 0.5, ("int8", 1): 0.5}

    def timed(kind, width):
        return slowed_once.get((kind, width), 0.1 * width)

    costs, active = path_timing._time_widths(timed, ["float32", "int8", "int8-fbgemm"], (1, 16, 64), 2, None)
    assert set(costs["int8-fbgemm"]) == {1, 16, 64} and "int8-fbgemm" in active
    assert set(costs["int8"]) == {1} and "int8" not in active  # any other path far slower is given up on


def test_a_quiet_machine_leaves_the_known_path_only_for_a_clearly_faster_one(tmp_path, x86_avx2):
    fbgemm = FBGEMM_FASTEST["int8-fbgemm"]
    slightly = {**FBGEMM_FASTEST, "float32": {width: 0.9 * cost for width, cost in fbgemm.items()}}
    assert choose(slightly) == "float32"
    assert choose_for(None, None, tmp_path, measure=Counting(slightly)).dtype == "int8-fbgemm"
    clearly = {**FBGEMM_FASTEST, "float32": {width: 0.5 * cost for width, cost in fbgemm.items()}}
    assert choose_for(None, None, tmp_path, measure=Counting(clearly)).dtype == "float32"


def test_a_cpu_of_no_known_kind_is_chosen_for_by_its_timings_alone(tmp_path, monkeypatch):
    _on_cpu(monkeypatch, lambda: ("an ARM CPU", {"asimd", "asimddp"}))
    assert choose_for(None, "m", tmp_path, measure=Counting(BUSY_TIMINGS, spread=2.1)).dtype == "int8"
    again = Counting(BUSY_TIMINGS)
    assert not choose_for(None, "m", tmp_path, measure=again).cached and again.calls == 1  # busy: not kept


def test_the_choice_is_remembered_per_cpu_torch_and_model(tmp_path, monkeypatch):
    measure = Counting(AVX2)
    first = choose_for(None, "model-a", tmp_path, measure=measure)
    assert first == Choice("int8-bf16", AVX2) and measure.calls == 1
    again = choose_for(None, "model-a", tmp_path, measure=Counting(VNNI))
    assert again.dtype == "int8-bf16" and again.cached and again.costs == AVX2  # not measured again
    assert choose_for(None, "model-b", tmp_path, measure=Counting(VNNI)).dtype == "int8"
    monkeypatch.setattr(cpu_choice.torch, "__version__", "9.9.9")
    assert choose_for(None, "model-a", tmp_path, measure=Counting(VNNI)).dtype == "int8"
    monkeypatch.setattr(cpu_choice, "cpu_identity", lambda: "another CPU [avx2]")
    measure = Counting(VNNI)
    assert not choose_for(None, "model-a", tmp_path, measure=measure).cached and measure.calls == 1


def test_kernel_settings_are_part_of_the_cpu(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    plain = cpu_choice.cpu_identity()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu_choice.cpu_identity() != plain and "ONEDNN_MAX_CPU_ISA=AVX2" in cpu_choice.cpu_identity()


def test_an_unreadable_choices_file_is_measured_again(tmp_path):
    (tmp_path / "dtype-choices.json").write_text("{not json")
    measure = Counting(VNNI)
    assert choose_for(None, "m", tmp_path, measure=measure).dtype == "int8" and measure.calls == 1
    assert json.loads((tmp_path / "dtype-choices.json").read_text())  # rewritten whole


def test_without_a_model_identity_nothing_is_remembered(tmp_path):
    choose_for(None, None, tmp_path, measure=Counting(VNNI))
    assert not (tmp_path / "dtype-choices.json").exists()


def test_measuring_swaps_the_layers_back(monkeypatch):
    # No candidate is given up on for being slow: the tiny model's timings follow the machine's load.
    monkeypatch.setattr(path_timing, "GIVE_UP_FACTOR", float("inf"))
    model = tiny_model(seed=5, eos_token_id=255)
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.inference_mode():
        before = model(input_ids=ids).logits
    spread = {}
    costs = measure_candidates(model, widths=(1, 4), context_tokens=8, prompt_tokens=16, repeats=2, spread=spread)
    assert set(costs) == set(CANDIDATES)
    assert all(set(measured) == {1, 4, 16} for measured in costs.values())  # the prompt is timed whole
    assert all(ratio >= 1.0 for ratios in spread.values() for ratio in ratios.values()) and spread["float32"]
    assert all(seconds > 0 for measured in costs.values() for seconds in measured.values())
    assert int8_kind(model) is None and model.config._attn_implementation != attention.FLOAT64_ATTENTION
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, before)


def test_a_candidate_that_cannot_run_here_is_left_out(monkeypatch):
    def broken(a, b):
        raise RuntimeError("no int8 kernel")

    monkeypatch.setattr(quantize.torch, "_int_mm", broken)
    said = []
    costs = measure_candidates(tiny_model(seed=5), widths=(1,), context_tokens=4, prompt_tokens=0, repeats=1,
                               say=said.append)
    assert set(costs) == {"float32", "int8-bf16", "int8-fbgemm"} and any("int8 left out" in line for line in said)


def test_fbgemm_that_is_not_exact_here_is_left_out(monkeypatch):
    # As FBGEMM's AVX2 kernel is with 8-bit activations: sums off by a little.
    exact_op = torch.ops.quantized.linear_dynamic

    def saturating(levels, packed, reduce_range):
        return exact_op(levels, packed, reduce_range).clamp(-20000, 20000)

    monkeypatch.setattr(torch.ops.quantized, "linear_dynamic", saturating)
    monkeypatch.setattr(int8_kernels, "_FBGEMM_LEVELS_HERE", [])  # checked again, with the saturating op
    said = []
    costs = measure_candidates(tiny_model(seed=5), widths=(1,), context_tokens=4, prompt_tokens=0, repeats=1,
                               say=said.append)
    assert "int8-fbgemm" not in costs and "int8" in costs
    assert any("int8-fbgemm left out (FBGEMM's int8 linear is not exact here)" in line for line in said)


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    monkeypatch.delenv("REWRITER_DTYPE", raising=False)
    monkeypatch.setattr(models, "KEEP_MIN_PARAMETERS", 0)  # keep the tiny model's choice and weights
    return tmp_path


def test_auto_loads_the_measured_choice_and_says_so_in_one_line(tiny_checkpoint, private_cache, monkeypatch):
    measure = Counting(AVX2)
    monkeypatch.setattr(cpu_choice, "measure_candidates", measure)
    said = []
    loaded = load_model(str(tiny_checkpoint), dtype="auto", progress=said.append)
    assert loaded.dtype == "int8-bf16" and int8_kind(loaded.model) == "int8-bf16"
    assert [line for line in said if line.startswith("dtype auto: int8-bf16 (measured now")]
    # The window policy starts from the costs measured for the chosen path.
    decoder = Decoder(loaded.model, loaded.tokenizer, pass_costs=loaded.pass_costs())
    assert decoder.lookahead.prior == pass_cost_curve(AVX2["int8-bf16"])
    said.clear()
    again = load_model(str(tiny_checkpoint), dtype="auto", progress=said.append)
    assert again.dtype == "int8-bf16" and measure.calls == 1
    assert [line for line in said if line.startswith("dtype auto: int8-bf16 (chosen before")]


def test_doctor_says_what_auto_runs_and_why_and_retimes_on_request(tiny_checkpoint, private_cache, monkeypatch):
    from rewriter.weights.doctor import doctor

    measure = Counting(AVX2)
    monkeypatch.setattr(cpu_choice, "measure_candidates", measure)
    _on_cpu(monkeypatch, lambda: ("an ARM CPU", {"asimd"}))
    said: list[str] = []
    assert doctor(str(tiny_checkpoint), retime=False, say=said.append, progress=lambda m: None) == 0
    assert said[0].startswith("CPU: ") and "no path is known fastest" in said[2]
    assert "no choice kept yet" in said[3] and said[-1].endswith("now int8-bf16") and measure.calls == 1
    said.clear()
    doctor(str(tiny_checkpoint), retime=False, say=said.append, progress=lambda m: None)
    assert "dtype auto: int8-bf16 (chosen before" in said[-1] and measure.calls == 1  # kept: not timed again
    said.clear()
    doctor(str(tiny_checkpoint), retime=True, say=said.append, progress=lambda m: None)
    assert "the kept choice (int8-bf16) is forgotten" in said[3] and measure.calls == 2


def test_forgetting_a_choice_keeps_the_others(tmp_path):
    choose_for(None, "a", tmp_path, measure=Counting(AVX2))
    choose_for(None, "b", tmp_path, measure=Counting(VNNI))
    cpu_choice.forget(tmp_path, cpu_choice.choice_key("a"))
    assert cpu_choice.remembered(tmp_path, cpu_choice.choice_key("a")) is None
    assert cpu_choice.remembered(tmp_path, cpu_choice.choice_key("b")).dtype == "int8"


def test_auto_quantizes_once_the_layers_it_timed(tiny_checkpoint, private_cache, monkeypatch):
    quantized = []
    real_int8_weights = quantize.int8_weights

    def counting(linear):
        quantized.append(linear)
        return real_int8_weights(linear)

    monkeypatch.setattr(quantize, "int8_weights", counting)
    monkeypatch.setattr(cpu_choice, "choose", lambda costs, profile=None: "int8-bf16")
    monkeypatch.setattr(cpu_choice, "known_fastest", lambda: None)  # the choice is the test's, not the CPU's kind
    monkeypatch.setattr(cpu_choice, "STEADY_SPREAD", float("inf"))
    reference = load_model(str(tiny_checkpoint), dtype="float32").model
    linears = [m for m in reference.modules() if isinstance(m, torch.nn.Linear)]
    loaded = load_model(str(tiny_checkpoint), dtype="auto")
    assert loaded.dtype == "int8-bf16" and len(quantized) == len(linears)  # both kinds share one rounding
    assert len(list((private_cache / "quantized").glob("*-int8-bf16.safetensors"))) == 1
    quantize.quantize_int8(reference, "int8-bf16")
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(loaded.model(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_the_flag_and_rewriter_dtype_skip_the_measurement(tiny_checkpoint, private_cache, monkeypatch):
    measure = Counting(AVX2)
    monkeypatch.setattr(cpu_choice, "measure_candidates", measure)
    assert load_model(str(tiny_checkpoint), dtype="float32").dtype == "float32"
    monkeypatch.setenv("REWRITER_DTYPE", "int8")
    assert load_model(str(tiny_checkpoint)).dtype == "int8"
    assert measure.calls == 0


@pytest.mark.parametrize("kind", INT8_KINDS)
def test_int8_weights_are_quantized_once_and_kept(tiny_checkpoint, private_cache, monkeypatch, kind):
    first = load_model(str(tiny_checkpoint), dtype=kind)
    kept = list((private_cache / "quantized").glob(f"*-{kind}.safetensors"))
    assert len(kept) == 1

    def quantizing_again(linear):
        raise AssertionError("quantized again")

    monkeypatch.setattr(quantize, "int8_weights", quantizing_again)
    second = load_model(str(tiny_checkpoint), dtype=kind)
    assert int8_kind(second.model) == kind
    # Unaligned weights (as a safetensors file holds them) crash the int8 kernels on the 0.5B model.
    assert all(buffer.data_ptr() % 64 == 0 for buffer in second.model.buffers() if buffer.numel() > 1)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(first.model(input_ids=ids).logits, second.model(input_ids=ids).logits)


def test_a_stale_or_foreign_weights_file_is_never_used(tiny_checkpoint, private_cache):
    from safetensors.torch import load_file, save_file

    reference = load_model(str(tiny_checkpoint), dtype="int8-bf16")
    [kept] = (private_cache / "quantized").glob("*-int8-bf16.safetensors")
    state, key = load_file(str(kept)), _key(kept)
    # The right key with tensors of the wrong shape, then tensors of the right shape under another key.
    save_file({name: tensor[:1].contiguous() for name, tensor in state.items()}, str(kept), metadata={"key": key})
    said = []
    loaded = load_model(str(tiny_checkpoint), dtype="int8-bf16", progress=said.append)
    assert any("do not fit this model" in line for line in said)
    save_file({name: torch.zeros_like(tensor) for name, tensor in state.items()}, str(kept),
              metadata={"key": "some other model|int8-bf16|format 1"})
    said.clear()
    loaded = load_model(str(tiny_checkpoint), dtype="int8-bf16", progress=said.append)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(loaded.model(input_ids=ids).logits, reference.model(input_ids=ids).logits)


@pytest.mark.parametrize("kind", ["int8-fbgemm", "int8"])
def test_a_weights_file_cut_short_is_quantized_again_not_half_loaded(tiny_checkpoint, private_cache, kind):
    if kind == "int8-fbgemm" and not int8_kernels.fbgemm_levels():
        pytest.skip("no exact FBGEMM here")
    reference = load_model(str(tiny_checkpoint), dtype=kind)
    [kept] = (private_cache / "quantized").glob(f"*-{kind}.safetensors")
    with open(kept, "r+b") as file:
        file.truncate(kept.stat().st_size - 100)
    said = []
    loaded = load_model(str(tiny_checkpoint), dtype=kind, progress=said.append)
    assert any("cannot be read" in line for line in said)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(loaded.model(input_ids=ids).logits, reference.model(input_ids=ids).logits)


def _key(path):
    from safetensors import safe_open

    with safe_open(str(path), "pt") as stored:
        return stored.metadata()["key"]


def test_a_deep_model_is_timed_on_its_first_layers_and_put_back_whole():
    model = tiny_model(seed=5, layers=6)
    made: dict = {}
    costs = measure_candidates(model, widths=(1, 4), context_tokens=4, prompt_tokens=0, repeats=1,
                               made=made, sample_layers=2)
    assert len(model.model.layers) == 6 and model.config.num_hidden_layers == 6
    assert len(model.config.layer_types) == 6
    assert set(costs["float32"]) == {1, 4} and all(1 in measured for measured in costs.values())
    for layers in made.values():  # only the sampled layers and the output layer were quantized
        assert {name.split(".")[2] for name in layers if name.startswith("model.layers.")} == {"0", "1"}
        assert "lm_head" in layers


def test_the_sample_counts_each_further_layer_at_its_cost_per_layer(monkeypatch):
    sample = {"float32": {1: 10.0, 16: 20.0}}, {"float32": {1: 2.0, 16: 4.0}}  # passes, output layers alone
    monkeypatch.setattr(path_timing, "_measure_sample", lambda *args: sample)
    costs = measure_candidates(tiny_model(layers=6), sample_layers=2)
    # 2 layers cost 10 - 2: each 4; 6 layers 24, plus the output layer's 2.
    assert costs == {"float32": {1: 26.0, 16: 4.0 + 16.0 * 3}}
    assert measure_candidates(tiny_model(layers=2), sample_layers=2) == sample[0]  # shallow: as timed


def test_the_model_is_whole_again_when_the_sampled_timing_fails(monkeypatch):
    def failing(*args):
        raise RuntimeError("kernel failed")

    monkeypatch.setattr(path_timing, "_measure_sample", failing)
    model = tiny_model(layers=5)
    with pytest.raises(RuntimeError):
        measure_candidates(model, sample_layers=2)
    assert len(model.model.layers) == 5 and model.config.num_hidden_layers == 5
