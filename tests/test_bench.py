"""The efficiency bench on small models: every figure present, finite and drawn from real measurements.

No test here asserts a speed: timings on a shared 2-core machine say nothing. What is
checked is what must hold whatever the load: the analytic FLOP count equals what torch
counts, greedy decoding gives the same tokens with and without the cache, and direct
backprop through 64 Euler steps needs far more memory than through 4 while the adjoint
method does not.
"""

import contextlib
import io
import json
import math

import pytest
import torch

from steering.cli.main import main
from steering.data.heldout import heldout_prompts
from steering.evaluation import bench, efficiency
from steering.evaluation.evaluate import bits_per_byte, heldout_openings
from steering.evaluation.measures import solver_divergence
from steering.model.ode import SolverConfig
from steering.model.transformer import ModelConfig, build_model
from steering.training.checkpoint import save_checkpoint

# Big enough that 64 stored Euler steps (about 1 MB each) stand far above allocator noise.
BENCH_SMALL = dict(vocab_size=300, block_size=64, d_model=64, n_heads=2, field_hidden=128, control_embed_dim=8)
RATIO_KEYS = (
    "latency_ratio",
    "flop_ratio",
    "kv_cache_speedup",
    "adjoint_mem_ratio_64_4",
    "direct_mem_ratio_64_4",
    "regimes_sweep_s",
)


def _models(vocab_size: int):
    config = {**BENCH_SMALL, "vocab_size": vocab_size}
    hybrid, discrete = efficiency.random_demo_models(config, seed=0)
    return hybrid, discrete, config


@pytest.fixture(scope="module")
def bench_checkpoints(small_tokenizer, tmp_path_factory):
    hybrid, discrete, _ = _models(small_tokenizer.get_vocab_size())
    root = tmp_path_factory.mktemp("bench")
    return (
        save_checkpoint(hybrid, root / "hybrid", small_tokenizer, dtype=torch.float32),
        save_checkpoint(discrete, root / "discrete", small_tokenizer, dtype=torch.float32),
    )


@pytest.fixture(scope="module")
def bench_json(bench_checkpoints):
    """The whole bench, run once through the CLI on the small checkpoints."""
    hybrid_dir, discrete_dir = bench_checkpoints
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "--json", "--checkpoint", str(hybrid_dir), "--baseline", str(discrete_dir)])
    assert code == 0
    return json.loads(out.getvalue())


def test_bench_json_has_every_ratio_finite_and_positive(bench_json):
    for key in RATIO_KEYS:
        assert key in bench_json, key
        assert math.isfinite(bench_json[key]) and bench_json[key] > 0, (key, bench_json[key])
    assert bench_json["repeats"] >= 7
    assert len(bench_json["hybrid_forward_runs_ms"]) == len(bench_json["discrete_forward_runs_ms"]) == 7
    median = sorted(bench_json["hybrid_forward_runs_ms"])[3]
    assert bench_json["hybrid_forward_ms"] == pytest.approx(median)
    assert bench_json["latency_ratio"] == pytest.approx(
        bench_json["hybrid_forward_ms"] / bench_json["discrete_forward_ms"]
    )


def test_bench_memory_ratios_come_from_two_real_measurements(bench_json):
    assert bench_json["memory_method"] in ("VmHWM after clear_refs", "ru_maxrss")
    for kind in ("adjoint", "direct"):
        many, few = bench_json[f"{kind}_64_steps"], bench_json[f"{kind}_4_steps"]
        assert many["growth_mb"] > 0 and few["growth_mb"] > 0
        assert bench_json[f"{kind}_mem_ratio_64_4"] == pytest.approx(many["growth_mb"] / few["growth_mb"])
    # direct backprop keeps every step's activations (about 1 MB each here); the adjoint keeps none
    direct_extra = bench_json["direct_64_steps"]["growth_mb"] - bench_json["direct_4_steps"]["growth_mb"]
    adjoint_extra = bench_json["adjoint_64_steps"]["growth_mb"] - bench_json["adjoint_4_steps"]["growth_mb"]
    assert direct_extra > 30
    assert adjoint_extra < direct_extra / 4
    assert bench_json["direct_mem_ratio_64_4"] > bench_json["adjoint_mem_ratio_64_4"]


def test_bench_generation_and_sweep_figures(bench_json):
    assert bench_json["kv_cache_same_tokens"] is True
    assert bench_json["kv_cache_prompt_tokens"] + bench_json["kv_cache_new_tokens"] == BENCH_SMALL["block_size"]
    assert bench_json["kv_cache_speedup"] == pytest.approx(
        bench_json["cached_tokens_per_s"] / bench_json["uncached_tokens_per_s"]
    )
    assert bench_json["regimes_sweep_points"] == 41
    assert bench_json["regimes_sweep_nfe"] >= 41 * 2 * 6  # two adaptive solvers, several evaluations per solve
    assert bench_json["regimes_sweep_method"].startswith("nfe_regimes")


def test_bench_decode_figures(bench_json, small_tokenizer):
    for key in (
        "decode_tokens_per_s",
        "decode_tokens_per_s_general",
        "decode_speedup",
        "decode_ms_per_token_floor",
        "latency_ratio_fused",
    ):
        assert math.isfinite(bench_json[key]) and bench_json[key] > 0, (key, bench_json[key])
    assert bench_json["decode_same_tokens"] is True
    assert bench_json["decode_threads"] == 1
    assert bench_json["decode_prompt_tokens"] + bench_json["decode_new_tokens"] == BENCH_SMALL["block_size"]
    assert bench_json["decode_speedup"] == pytest.approx(
        bench_json["decode_tokens_per_s"] / bench_json["decode_tokens_per_s_general"]
    )
    assert bench_json["decode_tokens_per_s"] == pytest.approx(1e3 / bench_json["decode_ms_per_token"])
    # the discrete baseline's decode, measured in the same run: the ratio issue 64's parity bar reads
    assert bench_json["decode_tokens_per_s_discrete"] == pytest.approx(1e3 / bench_json["decode_ms_per_token_discrete"])
    assert bench_json["decode_ratio"] == pytest.approx(
        bench_json["decode_tokens_per_s"] / bench_json["decode_tokens_per_s_discrete"]
    )
    assert bench_json["decode_floor_dtype"] in bench_json["decode_floor_ms_by_dtype"]
    assert bench_json["decode_ms_per_token_floor"] == pytest.approx(
        min(bench_json["decode_floor_ms_by_dtype"].values())
    )
    config = ModelConfig(**{**BENCH_SMALL, "arch": "hybrid", "vocab_size": small_tokenizer.get_vocab_size()})
    assert bench_json["decode_weight_macs"] == efficiency.decode_weight_macs(config)
    assert bench_json["latency_minus_flop_ratio"] == pytest.approx(
        bench_json["latency_ratio"] - bench_json["flop_ratio"]
    )


@pytest.mark.parametrize("fixture", ["small_entry_hybrid", "small_hybrid", "small_discrete"])
def test_a_fast_decoding_step_multiplies_exactly_the_weights_counted(fixture, request):
    """The fused step's products are the token's weight products: nothing computed twice, nothing missed
    (the field's output product has one extra row, its biases, fed by a constant 1)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from steering.inference.decode import new_stepper

    class CountMatmuls(TorchDispatchMode):  # FlopCounterMode has no formula for the in-place addmm_
        macs = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.addmm_.default):
                a, b = args[-2], args[-1]
                self.macs += a.shape[0] * a.shape[1] * b.shape[1]
            return func(*args, **(kwargs or {}))

    model = request.getfixturevalue(fixture)
    solver = SolverConfig("euler", steps=4)
    with torch.inference_mode():
        step = new_stepper(model, 1, torch.zeros(1, 2), solver)
        step(torch.tensor([[1, 2, 3]]), 0)
        with CountMatmuls() as counter:
            step(torch.tensor([[4]]), 3)
    bias_rows = solver.steps * model.config.d_model if model.config.arch == "hybrid" else 0
    assert counter.macs == efficiency.decode_weight_macs(model.config, solver) + bias_rows


def test_analytic_flops_equal_torch_counted_flops(small_tokenizer):
    hybrid, discrete, _ = _models(small_tokenizer.get_vocab_size())
    idx = torch.zeros(3, 20, dtype=torch.long)
    for model in (hybrid, discrete):
        assert efficiency.counted_forward_flops(model, idx) == efficiency.forward_flops(
            model.config, 3, 20, attention=False
        )
    # RK4 evaluates the field four times a step: the count follows the solver that actually runs
    rk4 = SolverConfig("rk4", steps=2)
    assert efficiency.counted_forward_flops(hybrid, idx, rk4) == efficiency.forward_flops(
        hybrid.config, 3, 20, 8, attention=False
    )
    assert efficiency.forward_flops(hybrid.config, 3, 20) > efficiency.forward_flops(
        hybrid.config, 3, 20, attention=False
    )
    # a token-mixing field adds its attention's projections at every evaluation
    mixing = build_model(ModelConfig(**{**hybrid.config.to_dict(), "field_heads": 2, "n_pre": 1, "n_post": 1}))
    assert efficiency.counted_forward_flops(mixing, idx) == efficiency.forward_flops(
        mixing.config, 3, 20, attention=False
    )


def test_demo_size_flop_ratio_is_the_latency_floor():
    demo = {**efficiency.DEMO_CONFIG}
    ratio = efficiency.forward_flops(ModelConfig(arch="hybrid", **demo), 8, 128) / efficiency.forward_flops(
        ModelConfig(arch="discrete", **demo), 8, 128
    )
    # 4 field evaluations at width 512 replace two attention blocks: about 0.9 of the discrete FLOPs
    assert 0.85 < ratio < 0.95


def test_sweep_without_a_tokenizer_times_41_direct_dopri5_solves(small_tokenizer):
    hybrid, _, _ = _models(small_tokenizer.get_vocab_size())
    result = efficiency.measure_regimes_sweep(hybrid, tok=None)
    assert result.method == "direct dopri5 solves"
    assert result.points == 41 and result.seconds > 0
    assert result.total_nfe >= 41 * 6


def _recorded_memory(spec, steps, adjoint, batch, tokens):
    """A stand-in for the memory subprocesses: this test checks what --random-demo hands them; the
    real one-process-per-configuration measurement is checked by the CLI test above (an in-process
    probe is unreliable inside pytest, where a step can fit in memory freed earlier)."""
    return efficiency.MemoryResult(
        steps=steps,
        adjoint=adjoint,
        growth_bytes=(100 + steps) * 2**20,
        baseline_bytes=2**30,
        method="recorded",
        step_s=0.0,
    )


def test_random_demo_flag_runs_the_bench_without_checkpoints(monkeypatch, small_tokenizer, capsys):
    small = {**BENCH_SMALL, "vocab_size": small_tokenizer.get_vocab_size()}
    monkeypatch.setattr(efficiency, "DEMO_CONFIG", small)
    monkeypatch.setattr(efficiency, "demo_tokenizer", lambda vocab_size: small_tokenizer)
    specs = []
    monkeypatch.setattr(
        bench, "measure_training_memory", lambda spec, *args: specs.append(spec) or _recorded_memory(spec, *args)
    )
    assert main(["bench", "--random-demo", "--checkpoint", "/nonexistent", "--baseline", "/nonexistent"]) == 0
    text = capsys.readouterr().out
    for key in RATIO_KEYS:
        assert key in text
    assert "random demo-size models" in text
    assert len(specs) == 4 and all(spec == {"source": "random", "config": small} for spec in specs)


def test_bench_refuses_too_few_repeats_and_missing_checkpoints(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--repeats", "3"])
    assert "at least 7" in capsys.readouterr().err
    assert main(["bench", "--checkpoint", str(tmp_path / "none"), "--baseline", str(tmp_path / "none")]) == 2
    assert "checkpoint folder not found" in capsys.readouterr().err


def test_bench_refuses_models_in_the_wrong_order(small_tokenizer):
    hybrid, discrete, config = _models(small_tokenizer.get_vocab_size())
    with pytest.raises(ValueError, match="hybrid model and a discrete baseline"):
        bench.run_bench(discrete, hybrid, memory_spec={"source": "random", "config": config})


def test_a_depth_varying_hybrid_is_benched_at_its_own_solver_with_euler_4_beside_it(
    small_depth_hybrid, small_discrete, small_tokenizer
):
    hybrid, discrete = small_depth_hybrid, small_discrete
    assert hybrid.training_solver == SolverConfig("rk4", steps=1)
    idx = torch.zeros(2, 16, dtype=torch.long)
    # the depth-varying block's products are counted as a block's, once per field evaluation
    assert efficiency.counted_forward_flops(hybrid, idx, hybrid.training_solver) == efficiency.forward_flops(
        hybrid.config, 2, 16, efficiency.fixed_step_nfe(hybrid.training_solver), attention=False
    )
    point = efficiency.euler_point(hybrid, discrete, small_tokenizer, 2, 16, repeats=1)
    assert point["solver"] == SolverConfig("euler", steps=4).label() and point["nfe"] == 4
    assert point["flop_ratio"] == pytest.approx(
        efficiency.forward_flops(hybrid.config, 2, 16, 4) / efficiency.forward_flops(discrete.config, 2, 16)
    )
    assert math.isfinite(point["latency_ratio"]) and point["latency_ratio"] > 0
    prompts = heldout_prompts(small_tokenizer, efficiency.DIVERGENCE_PROMPTS)
    with torch.no_grad():
        euler = solver_divergence(hybrid, prompts, efficiency.DIVERGENCE_US, SolverConfig("euler", steps=4))
    assert point["solver_divergence"] == pytest.approx(euler)
    # the fixture's field changes along τ: four Euler steps land farther from the ODE than RK4 does
    assert point["solver_divergence"] > point["solver_divergence_trained"] > 0
    # and each solver's bits/byte on the held-out openings, as evaluate scores them
    openings = heldout_openings(efficiency.BPB_OPENINGS_PER_GROUP)
    assert point["bits_per_byte_openings"] == len(openings) > 0
    assert point["bits_per_byte"] == pytest.approx(
        bits_per_byte(hybrid, small_tokenizer, openings, solver=SolverConfig("euler", steps=4))
    )
    assert point["bits_per_byte_trained"] == pytest.approx(bits_per_byte(hybrid, small_tokenizer, openings))
    assert point["bits_per_byte"] != point["bits_per_byte_trained"]


def test_the_bench_runs_the_hybrid_at_the_asked_control_and_names_it(bench_json, small_tokenizer):
    assert bench_json["control"] == {"sentiment": 0.0, "style": 0.0}  # the default, named by axis
    hybrid, discrete, _ = _models(small_tokenizer.get_vocab_size())
    seen = []
    hybrid.register_forward_pre_hook(lambda module, args: seen.append(args[1].clone()))
    efficiency.measure_latency(hybrid, discrete, batch=2, tokens=8, repeats=1, control=(1.5, -1.0))
    assert len(seen) == 2 and all(torch.equal(u, torch.tensor([[1.5, -1.0]] * 2)) for u in seen)
    with pytest.raises(ValueError, match="takes 2"):
        efficiency.control_rows(hybrid, 1, (1.0,))


class _Stop(Exception):
    pass


def test_bench_takes_the_checkpoints_axis_names(bench_checkpoints, capsys, monkeypatch):
    hybrid_dir, discrete_dir = bench_checkpoints
    seen = {}

    def record(*args, **kwargs):  # the control the command hands the bench, without running it
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(bench, "run_bench", record)
    with pytest.raises(_Stop):
        main(["bench", "--checkpoint", str(hybrid_dir), "--baseline", str(discrete_dir), "--u", "style=-1"])
    assert seen["control"] == {"sentiment": 0.0, "style": -1.0}
    assert main(["bench", "--checkpoint", str(hybrid_dir), "--baseline", str(discrete_dir), "--u", "nope=1"]) == 2
    assert "sentiment in [-3, 3], style in [-3, 3]" in capsys.readouterr().err
