import json
import math
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from steering.data import reviews as data
from steering.training.checkpoint import CheckpointError, load_checkpoint, load_saved_state, read_log, save_checkpoint
from steering.training.train import make_config, train

ROOT = Path(__file__).resolve().parent.parent
QUICK = dict(steps=40, stage2_steps=10, eval_every=20, max_reviews=1500)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "hybrid"
    train(make_config("tiny", out=str(out)), progress=False)
    return out


def test_tiny_preset_lowers_heldout_loss_and_logs_every_step(tiny_run):
    log = read_log(tiny_run)
    config = json.loads((tiny_run / "config.json").read_text())
    cfg = config["meta"]["train"]
    assert len(log) == cfg["steps"] + cfg["stage2_steps"]
    first_val = config["meta"]["initial_val_loss"]
    last_val = [r["val_loss"] for r in log if "val_loss" in r][-1]
    assert last_val < first_val - 0.5
    vocab = config["model"]["vocab_size"]
    assert abs(log[0]["loss"] - math.log(vocab)) / math.log(vocab) < 0.10
    for key in ("loss", "grad_norm", "ode_grad_norm", "alpha", "tokens_per_s", "exploding", "vanishing"):
        assert key in log[0] and key in log[-1]
    assert {r["stage"] for r in log} == {1, 2}
    assert all("contrast_loss" in r for r in log if r["stage"] == 2)
    assert not (tiny_run / "resume").exists()
    # stage 1's end state stays, for stage-2 variants to resume from
    kept = json.loads((tiny_run / "stage1_end" / "state.json").read_text())
    assert (kept["stage"], kept["step"]) == (1, cfg["steps"])


def test_stage2_trains_only_the_ode_block_and_late_blocks(tiny_run, tmp_path):
    stage1 = tmp_path / "stage1"
    train(
        make_config("tiny", out=str(stage1), stage2_steps=0, tokenizer=str(tiny_run / "tokenizer.json")), progress=False
    )
    a, _, _ = load_checkpoint(stage1)
    b, _, _ = load_checkpoint(tiny_run)
    sa, sb = a.state_dict(), b.state_dict()
    for name in sa:
        same = torch.equal(sa[name], sb[name])
        if name.startswith(("wte", "wpe", "pre.", "ln_f")):
            assert same, f"{name} must be frozen in stage 2"
    assert not torch.equal(sa["field.fc_out.weight"], sb["field.fc_out.weight"])


def test_checkpoint_round_trip(small_hybrid, small_tokenizer, tmp_path):
    save_checkpoint(small_hybrid, tmp_path / "c", small_tokenizer, dtype=torch.float32)
    loaded, tok, config = load_checkpoint(tmp_path / "c")
    idx = torch.randint(0, small_hybrid.config.vocab_size, (1, 9))
    with torch.no_grad():
        assert torch.allclose(loaded(idx)[0], small_hybrid(idx)[0], atol=1e-6)
    assert config["model"] == small_hybrid.config.to_dict()
    half = save_checkpoint(small_hybrid, tmp_path / "h", small_tokenizer)  # float16 on disk, float32 loaded
    loaded_half, _, _ = load_checkpoint(half)
    assert next(loaded_half.parameters()).dtype == torch.float32


def test_missing_or_corrupt_checkpoint_names_the_file(small_checkpoint, tmp_path):
    with pytest.raises(CheckpointError, match="nowhere"):
        load_checkpoint(tmp_path / "nowhere")
    (small_checkpoint / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(small_checkpoint)
    (small_checkpoint / "config.json").write_text("{oops")
    with pytest.raises(CheckpointError, match="config.json"):
        load_checkpoint(small_checkpoint)


def test_resume_continues_exactly_where_it_stopped(tmp_path, monkeypatch):
    cfg = make_config("tiny", out=str(tmp_path / "straight"), **QUICK)
    train(cfg, progress=False)
    straight, _, _ = load_checkpoint(tmp_path / "straight")

    interrupted = make_config("tiny", out=str(tmp_path / "resumed"), **QUICK)
    real_sample, calls = data.BatchSampler.sample, {"n": 0}

    def flaky_sample(self):
        calls["n"] += 1
        if calls["n"] == 26:
            raise KeyboardInterrupt
        return real_sample(self)

    monkeypatch.setattr(data.BatchSampler, "sample", flaky_sample)
    with pytest.raises(KeyboardInterrupt):
        train(interrupted, progress=False)
    monkeypatch.setattr(data.BatchSampler, "sample", real_sample)
    assert (tmp_path / "resumed" / "resume" / "state.json").is_file()
    # the run can be measured while it trains: its saved state names the model, the tokenizer lies beside it
    midway, _, at = load_saved_state(tmp_path / "resumed")
    saved = load_file(str(tmp_path / "resumed" / "resume" / "state.safetensors"))
    state = json.loads((tmp_path / "resumed" / "resume" / "state.json").read_text())
    assert at == {"step": state["step"], "stage": 1} and 0 < state["step"] < QUICK["steps"]
    for name, value in midway.state_dict().items():
        assert torch.equal(value, saved[f"model.{name}"].float()), name
    train(make_config("tiny", out=str(tmp_path / "resumed"), resume=True, **QUICK), progress=False)
    resumed, _, _ = load_checkpoint(tmp_path / "resumed")
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-3), name
    steps = [r["step"] for r in read_log(tmp_path / "resumed") if r["stage"] == 1]
    assert steps[-1] == QUICK["steps"] - 1 and steps.count(20) == 1


def test_a_run_stopped_right_after_a_save_or_in_a_log_line_resumes_with_each_step_logged_once(tmp_path, monkeypatch):
    """The state that counts a step done is saved after the step's log line: stopped between the two (torchrun ending
    rank 0 once rank 1 was killed, under load), the resumed run lost that step's line when the order was reversed."""
    from steering.training import train as train_module

    short = dict(steps=8, stage2_steps=2, eval_every=4, max_reviews=400, save_every_s=0.0)
    out = tmp_path / "run"
    real_save = train_module._save_state

    def save_then_stop(path, model, opt, step, stage, *rest):
        real_save(path, model, opt, step, stage, *rest)
        if (stage, step) == (1, 6):  # the state now says "steps 0-5 done"
            raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "_save_state", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(make_config("tiny", out=str(out), **short), progress=False)
    monkeypatch.setattr(train_module, "_save_state", real_save)
    log = out / "train_log.jsonl"
    log.write_text(log.read_text() + '{"stage": 1, "step": 6, "lo')  # and a line cut short by the stop
    train(make_config("tiny", out=str(out), resume=True, **short), progress=False)
    assert [(r["stage"], r["step"]) for r in read_log(out)] == [(1, s) for s in range(8)] + [(2, 0), (2, 1)]


def test_stage2_loss_contrasts_each_axis_and_also_fits_u_zero(small_hybrid):
    from steering.model.transformer import language_model_loss
    from steering.training.train import NEUTRAL_SHARE, stage2_loss

    small_hybrid.eval()  # no path-roughness term, so the parts are plain LM and contrast
    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    y = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])  # a dropped axis has no flipped case
    base = make_config("tiny", contrast_weight=2.0)
    with torch.no_grad():
        loss, parts = stage2_loss(small_hybrid, x, y, u, base)
        lm_own = float(language_model_loss(small_hybrid(x, u)[0], y))
        lm_zero = float(language_model_loss(small_hybrid(x, torch.zeros_like(u))[0], y))
    assert parts["lm_loss"] == pytest.approx((1 - NEUTRAL_SHARE) * lm_own + NEUTRAL_SHARE * lm_zero, rel=1e-5)
    assert float(loss) == pytest.approx(parts["lm_loss"] + 2.0 * parts["contrast_loss"], rel=1e-5)
    with torch.no_grad():  # a block that ignores u cannot tell a window's own control from the flipped one
        small_hybrid.field.alpha.zero_()
        _, blind = stage2_loss(small_hybrid, x, y, u, base)
    assert blind["contrast_loss"] == pytest.approx(math.log(2), rel=1e-6)


@pytest.mark.parametrize("fixture", ["small_depth_hybrid", "small_hybrid"])
def test_beyond_only_stage2_runs_the_copies_at_most_one_without_gradient_and_loses_nothing(fixture, request):
    """With B± alone training, the copies at |u| <= 1 run under no_grad: the loss, its logged parts and B±'s
    gradients are those of the one-batch computation (stage2_beyond_only off: every copy with its gradient)."""
    from steering.training.train import _freeze_for_stage2, stage2_loss

    model = request.getfixturevalue(fixture)
    model.add_beyond_steering()
    with torch.no_grad():
        for linear in (model.field.beyond_positive, model.field.beyond_negative):
            torch.nn.init.normal_(linear.weight, std=0.3)
    model.train()  # the penalties (RK4's error estimate or roughness) are part of the loss
    torch.manual_seed(3)
    x = torch.randint(1, model.config.vocab_size, (4, 12))
    y = torch.randint(1, model.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    results = []
    for beyond_only in (False, True):
        _freeze_for_stage2(model, beyond_only=True)
        model.zero_grad()
        cfg = make_config("tiny", contrast_u=2.0, contrast_weight=2.0, stage2_beyond_only=beyond_only)
        loss, parts = stage2_loss(model, x, y, u, cfg)
        loss.backward()
        grads = [p.grad.clone() for p in (model.field.beyond_positive.weight, model.field.beyond_negative.weight)]
        results.append((float(loss.detach()), parts, grads))
    (full_loss, full_parts, full_grads), (split_loss, split_parts, split_grads) = results
    assert split_loss == pytest.approx(full_loss, rel=1e-6)
    assert set(split_parts) == set(full_parts) and len(full_parts) == 3  # lm, contrast and the penalty
    for key, value in full_parts.items():
        assert split_parts[key] == pytest.approx(value, rel=1e-5, abs=1e-9), key
    for full, split in zip(full_grads, split_grads):
        assert full.abs().max() > 0 and torch.allclose(split, full, rtol=1e-4, atol=1e-7)


def test_stage2_style_axis_can_have_its_own_contrast_weight(small_hybrid):
    from steering.training.train import stage2_loss

    small_hybrid.eval()
    torch.manual_seed(1)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]])
    with torch.no_grad():
        no_style, _ = stage2_loss(
            small_hybrid, x, x, u, make_config("tiny", contrast_weight=2.0, style_contrast_weight=0.0)
        )
        shared, parts = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_weight=2.0))
        own, _ = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_weight=2.0, style_contrast_weight=5.0))
    sentiment = float(no_style) - parts["lm_loss"]  # = 2.0 x sentiment / 2: the weighted mean of the axes
    style = 2 * parts["contrast_loss"] - sentiment  # the logged contrast is the mean of the two axes
    assert float(shared) == pytest.approx(parts["lm_loss"] + (2.0 * sentiment + 2.0 * style) / 2, rel=1e-5)
    assert float(own) == pytest.approx(parts["lm_loss"] + (2.0 * sentiment + 5.0 * style) / 2, rel=1e-5)
    assert float(own) != pytest.approx(float(shared), rel=1e-4)


def test_alpha_init_reaches_the_model_from_the_training_config():
    from steering.model.transformer import build_model
    from steering.training.train import model_config

    assert make_config().alpha_init == 0.1
    model = build_model(model_config(make_config("tiny", alpha_init=1.0)))
    assert model.field.alpha.item() == 1.0


def test_stage1_loss_takes_the_roughness_relative_to_the_chosen_size(small_hybrid):
    from steering.model.ode import path_roughness
    from steering.training.train import stage1_loss

    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (2, 10))
    u = torch.tensor([[1.0, -1.0], [-1.0, 0.0]])
    small_hybrid.train()
    try:
        with torch.no_grad():
            _, state = stage1_loss(small_hybrid, x, x, u, make_config("tiny"))
            _, field = stage1_loss(small_hybrid, x, x, u, make_config("tiny", roughness_relative_to="field"))
            h0 = small_hybrid.encode(x)
            outputs = small_hybrid.middle(h0, u, record_outputs=True).field_outputs
    finally:
        small_hybrid.eval()
    assert state["roughness"] == pytest.approx(float(path_roughness(outputs, h0, "state")), rel=1e-5)
    assert field["roughness"] == pytest.approx(float(path_roughness(outputs, h0, "field")), rel=1e-5)
    assert field["roughness"] != pytest.approx(state["roughness"], rel=1e-2)


def test_stage2_can_take_its_own_roughness_penalty(small_hybrid):
    from steering.training.train import stage2_loss, stage2_view

    same = make_config("tiny", roughness_weight=7.0, roughness_relative_to="field")
    assert stage2_view(same) == same  # unset: stage 2 keeps stage 1's penalty
    own = make_config(
        "tiny",
        roughness_weight=7.0,
        roughness_relative_to="field",
        stage2_roughness_weight=500.0,
        stage2_roughness_relative_to="state",
    )
    view = stage2_view(own)
    assert (view.roughness_weight, view.roughness_relative_to) == (500.0, "state")
    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (2, 10))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    small_hybrid.train()
    try:
        with torch.no_grad():
            loss, parts = stage2_loss(small_hybrid, x, x, u, view)
            loss_field, parts_field = stage2_loss(small_hybrid, x, x, u, stage2_view(same))
    finally:
        small_hybrid.eval()
    rest = parts["lm_loss"] + view.contrast_weight * parts["contrast_loss"]
    assert float(loss) == pytest.approx(rest + 500.0 * parts["roughness"], rel=1e-5)
    assert parts["roughness"] != pytest.approx(parts_field["roughness"], rel=1e-2)


def test_freeze_alpha_keeps_the_scale_while_the_field_trains(tiny_run, tmp_path):
    out = tmp_path / "frozen_alpha"
    train(
        make_config(
            "tiny",
            out=str(out),
            steps=6,
            stage2_steps=2,
            warmup=2,
            max_reviews=400,
            eval_every=3,
            eval_reviews=16,
            alpha_init=0.7,
            train_alpha=False,
            tokenizer=str(tiny_run / "tokenizer.json"),
        ),
        progress=False,
    )
    model, _, config = load_checkpoint(out)
    assert model.field.alpha.item() == pytest.approx(0.7, abs=1e-3)  # float16 on disk
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in log} == {1, 2} and all(r["alpha"] == pytest.approx(0.7) for r in log)
    assert all(r["ode_grad_norm"] > 0 for r in log)  # the field itself still learns
    assert config["meta"]["train"]["train_alpha"] is False


def test_overlap_penalty_turns_the_fields_writes_away_from_its_reads(tiny_run, tmp_path):
    overlaps = {}
    for weight in (0.0, 20.0):
        out = tmp_path / f"overlap_{weight:g}"
        train(
            make_config(
                "tiny",
                out=str(out),
                steps=8,
                stage2_steps=2,
                warmup=2,
                max_reviews=400,
                eval_every=4,
                eval_reviews=16,
                overlap_weight=weight,
                tokenizer=str(tiny_run / "tokenizer.json"),
            ),
            progress=False,
        )
        model, _, config = load_checkpoint(out)
        overlaps[weight] = model.field.read_write_overlap().item()
        log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
        assert all(("overlap" in r) == (weight > 0) for r in log)
        assert config["meta"]["train"]["overlap_weight"] == weight
    assert overlaps[20.0] < 0.5 * overlaps[0.0], overlaps


def test_stage2_positive_side_scale_trains_the_controls_unequally(small_hybrid):
    """Side 0: the sentiment contrast of positive windows trains the model at -1 only (value unchanged)."""
    import torch.nn.functional as F

    from steering.model.transformer import language_model_loss
    from steering.training.train import stage2_loss

    small_hybrid.eval()
    torch.manual_seed(3)
    x = torch.randint(1, small_hybrid.config.vocab_size, (3, 10))
    u = torch.tensor([[1.0, 0.0]] * 3)
    common = dict(contrast_weight=2.0)  # style 0 in every row: the sentiment contrast alone

    def grads(loss):
        small_hybrid.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in small_hybrid.parameters() if p.grad is not None]

    full, _ = stage2_loss(small_hybrid, x, x, u, make_config("tiny", **common))
    one_sided, _ = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_positive_side=0.0, **common))
    assert one_sided.item() == pytest.approx(full.item(), rel=1e-6)

    def mean_ll(control):
        logits, _ = small_hybrid(x, control)
        return -F.cross_entropy(logits.transpose(1, 2), x, reduction="none").mean(1) * 3.0

    lm = 0.5 * language_model_loss(small_hybrid(x, u)[0], x) + 0.5 * language_model_loss(small_hybrid(x, 0 * u)[0], x)
    reference = lm + 2.0 * F.softplus(-(mean_ll(u).detach() - mean_ll(-u))).mean()
    expected, got, both = grads(reference), grads(one_sided), grads(full)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, expected))
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, both))


def _train_cli(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "steering",
        "train",
        "--preset",
        "tiny",
        "--out",
        str(out),
        "--no-progress",
        "--steps",
        "20",
        "--stage2-steps",
        "6",
        "--max-reviews",
        "1500",
        "--eval-every",
        "10",
        "--bf16",
        "--save-every-s",
        "0",
        *extra,
    ]


def test_a_killed_bf16_run_resumes_with_the_uninterrupted_runs_losses(tmp_path):
    """SIGKILL at an arbitrary moment (mid-step or mid-save), then --resume: every logged loss is
    bit for bit the uninterrupted run's."""
    import time

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(_train_cli(tmp_path / "straight"), check=True, cwd=ROOT, env=env, capture_output=True)
    tokenizer = str(tmp_path / "straight" / "tokenizer.json")
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _train_cli(killed, "--tokenizer", tokenizer),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = killed / "train_log.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if log.is_file() and len(log.read_text().splitlines()) >= 13:  # in stage 1, past an eval
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(log.read_text().splitlines())
    assert done_before < 26 and (killed / "resume").is_dir() or (killed / "resume.old").is_dir()
    subprocess.run(
        _train_cli(killed, "--tokenizer", tokenizer, "--resume"), check=True, cwd=ROOT, env=env, capture_output=True
    )
    straight, resumed = read_log(tmp_path / "straight"), read_log(killed)
    assert [(r["stage"], r["step"]) for r in resumed] == [(r["stage"], r["step"]) for r in straight]
    assert [r["loss"] for r in resumed] == [r["loss"] for r in straight]
    assert [r.get("val_loss") for r in resumed] == [r.get("val_loss") for r in straight]
    assert not (killed / "resume").exists() and not (killed / "resume.old").exists()


def test_bf16_training_keeps_the_solver_and_fp32_inference_agrees(tmp_path, small_tokenizer):
    from steering.model.ode import SolverConfig

    out = train(make_config("tiny", out=str(tmp_path / "bf16"), bf16=True, **QUICK), progress=False)
    model, tok, config = load_checkpoint(out)
    last_val = [r["val_loss"] for r in read_log(out) if "val_loss" in r][-1]
    assert last_val < config["meta"]["initial_val_loss"] - 0.5  # it learned
    x = torch.tensor([[0] + tok.encode("The movie was good and the acting was fine", add_special_tokens=False).ids])
    u = torch.tensor([[1.0, 0.0]])
    with torch.no_grad():
        fp32, _ = model(x, u)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16, _ = model(x, u)
        h0 = model.encode(x)
        # fixed-step solvers only: under bf16 the field's rounding noise enters dopri5's error
        # estimate and it takes more steps (measured here: 14 -> 20), which is why the lab infers in fp32
        for solver in (SolverConfig("euler", steps=4), SolverConfig("rk4", steps=2)):
            plain = model.middle(h0, u, solver)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                autocast = model.middle(h0, u, solver)
            assert plain.nfe == autocast.nfe, solver.label()
    assert model.middle(h0, u, SolverConfig("euler", steps=4)).nfe == 4
    p32, p16 = fp32.float().softmax(-1), bf16.float().softmax(-1)
    assert (p32 - p16).abs().sum(-1).max() < 0.05  # total variation per position
    assert (p32 - p16).abs().sum(-1).max() > 0  # bf16 did round something


def test_old_configs_load_and_one_warning_names_the_removed_options_that_mattered(small_checkpoint):
    from dataclasses import asdict

    from steering.training.config import REMOVED_OPTIONS, RemovedOptionWarning, train_config_from_dict

    # the previous shipped pair's records (tests/data) and the flat flagship's (assets/flat), written before the
    # options went; the depth hybrid shipped since (assets/hybrid) was written after, without them
    shipped = json.loads((ROOT / "tests" / "data" / "previous_pair_train_options.json").read_text())
    flagship_run = json.loads((ROOT / "assets" / "flat" / "config.json").read_text())["meta"]["train"]
    depth_run = json.loads((ROOT / "assets" / "hybrid" / "config.json").read_text())["meta"]["train"]
    # W1 (docs/journal.md), the one run of --init-from, which was added and removed between two ships
    w1_run = json.loads((ROOT / "tests" / "data" / "w1_train_options.json").read_text())
    assert set(REMOVED_OPTIONS) <= set(shipped["hybrid"]) | set(flagship_run) | set(w1_run)
    with pytest.warns(RemovedOptionWarning, match=r"init_from='assets/discrete'"):
        assert train_config_from_dict(w1_run).steps == 800  # the rest of its record still loads
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every removed option there is at the value the code now always uses
        for train_options in (*shipped.values(), flagship_run, depth_run):
            train_config_from_dict(train_options)
        # the flagship run, started before, writes every field of then: its removed options at their defaults
        flagship = make_config("demo", d_model=384, n_heads=6, steps=2800, contrast_u=2.0, bf16=True, resume=True)
        written = {**shipped["hybrid"], **asdict(flagship)}
        assert set(written) == set(asdict(flagship)) | (set(REMOVED_OPTIONS) & set(shipped["hybrid"]))
        assert train_config_from_dict(written) == flagship
    config = json.loads((small_checkpoint / "config.json").read_text())
    config["meta"] = {
        "train": {
            **shipped["hybrid"],
            "contrast_lexicon_weight": 5.0,
            "stage2_trains": "field",
            "stage2_overlap_weight": shipped["hybrid"]["overlap_weight"],
        }
    }
    (small_checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.warns(RemovedOptionWarning) as caught:
        model, _, loaded = load_checkpoint(small_checkpoint)
    (warning,) = [w for w in caught if issubclass(w.category, RemovedOptionWarning)]
    message = str(warning.message)
    assert "\n" not in message and "config.json" in message
    assert "contrast_lexicon_weight=5.0" in message and "stage2_trains='field'" in message
    # at what the code now does (stage 2's overlap weight = stage 1's, the contrast's scale 3): not named
    assert "stage2_overlap_weight" not in message and "contrast_scale" not in message
    assert loaded["meta"]["train"]["contrast_lexicon_weight"] == 5.0  # the file's record is returned as it is


def test_train_help_is_a_short_manual_in_groups(monkeypatch, capsys):
    from steering.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", "80")  # what a pipe (`| wc -l`) gets
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = capsys.readouterr().out
    assert len(text.splitlines()) <= 90, len(text.splitlines())  # 80 before the depth-varying field's six options
    titles = ["run control:", "model:", "data:", "stage 1:", "stage 2 (hybrid):", "penalties and contrast:"]
    assert [line for line in text.splitlines() if line in titles] == titles


def test_stage2_beyond_only_keeps_stage1s_fit_and_trains_directions_beyond_one(tiny_run, tmp_path):
    """Forked from stage 1's end state: every stage-1 weight is unchanged, so u = 0 and u = ±1 keep
    stage 1's fit; the new |u| > 1 directions moved, each side at its own rate."""
    import shutil

    from safetensors.torch import load_file

    out = tmp_path / "beyond"
    shutil.copytree(tiny_run / "stage1_end", out / "resume")
    cfg = json.loads((tiny_run / "config.json").read_text())["meta"]["train"]
    train(
        make_config(
            "tiny",
            out=str(out),
            resume=True,
            steps=cfg["steps"],
            stage2_steps=6,
            stage2_beyond_only=True,
            beyond_positive_lr_scale=0.0,  # B₊ held: only the negative side's directions move
            contrast_u=2.0,
            tokenizer=str(tiny_run / "tokenizer.json"),
        ),
        progress=False,
    )
    stage1 = {
        k[len("model.") :]: v
        for k, v in load_file(str(tiny_run / "stage1_end" / "state.safetensors")).items()
        if k.startswith("model.")
    }
    model, _, config = load_checkpoint(out)
    assert config["model"]["beyond_steering"] is True
    for name, value in model.state_dict().items():
        if name.startswith("field.beyond_negative"):
            assert value.abs().max() > 0, name
        elif name.startswith("field.beyond_positive"):
            assert value.abs().max() == 0, name  # its rate was scaled to 0
        else:
            assert torch.equal(value, stage1[name].half().float()), f"{name} must keep its stage-1 value"
    assert read_log(out)[-1]["stage"] == 2
