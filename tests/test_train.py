import json
import math
import os
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from steering import data
from steering.checkpoint import CheckpointError, load_checkpoint, read_log, save_checkpoint
from steering.train import make_config, train

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
    train(make_config("tiny", out=str(stage1), stage2_steps=0, tokenizer=str(tiny_run / "tokenizer.json")),
          progress=False)
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
    train(make_config("tiny", out=str(tmp_path / "resumed"), resume=True, **QUICK), progress=False)
    resumed, _, _ = load_checkpoint(tmp_path / "resumed")
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-3), name
    steps = [r["step"] for r in read_log(tmp_path / "resumed") if r["stage"] == 1]
    assert steps[-1] == QUICK["steps"] - 1 and steps.count(20) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_tiny_training(out: Path, timeout: int) -> tuple[int | None, str]:
    """(exit code or None when it hung, its combined output)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}",
           "-m", "steering", "train", "--preset", "tiny", "--out", str(out), "--steps", "30",
           "--stage2-steps", "6", "--eval-every", "15", "--max-reviews", "1000", "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return None, proc.communicate()[0]


def test_torchrun_with_two_processes(tmp_path):
    # about 15 s here. One CI run hung in this test; a second try on a fresh port tells a
    # one-off rendezvous hang (reported as a warning, with its output) from a real deadlock
    out = tmp_path / "ddp"
    code, output = _torchrun_tiny_training(out, timeout=150)
    if code is None:
        warnings.warn(f"torchrun hung for 150 s, retrying on a fresh port; its output:\n{output[-3000:]}")
        out = tmp_path / "ddp-retry"
        code, output = _torchrun_tiny_training(out, timeout=150)
    assert code is not None, f"torchrun hung twice; its output:\n{output[-4000:]}"
    assert code == 0, output[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["meta"]["world_size"] == 2
    log = read_log(out)
    assert len(log) == 36  # rank 0 logs once per step
    assert log[0]["tokens"] > 1024  # tokens of both ranks are counted
    load_checkpoint(out)


def test_stage2_loss_contrasts_each_axis_and_can_also_fit_u_zero(small_hybrid):
    from steering.model import language_model_loss
    from steering.train import stage2_loss
    small_hybrid.eval()   # no path-roughness term, so the parts are plain LM and contrast
    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    y = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])   # a dropped axis has no flipped case
    base = make_config("tiny", contrast_scale=3.0, contrast_weight=2.0)
    with torch.no_grad():
        loss, parts = stage2_loss(small_hybrid, x, y, u, base)
        loss_n, parts_n = stage2_loss(small_hybrid, x, y, u, make_config("tiny", contrast_scale=3.0, contrast_weight=2.0,
                                                                           stage2_neutral_lm=True))
        lm_own = float(language_model_loss(small_hybrid(x, u)[0], y))
        lm_zero = float(language_model_loss(small_hybrid(x, torch.zeros_like(u))[0], y))
    assert parts["lm_loss"] == pytest.approx(lm_own, rel=1e-5)
    assert parts_n["lm_loss"] == pytest.approx((lm_own + lm_zero) / 2, rel=1e-5)
    assert parts_n["contrast_loss"] == pytest.approx(parts["contrast_loss"], rel=1e-5)
    with torch.no_grad():
        _, parts_q = stage2_loss(small_hybrid, x, y, u, make_config("tiny", contrast_scale=3.0, contrast_weight=2.0,
                                                                    stage2_neutral_lm=True, stage2_neutral_share=0.75))
    assert parts_q["lm_loss"] == pytest.approx(0.25 * lm_own + 0.75 * lm_zero, rel=1e-5)
    assert float(loss) == pytest.approx(parts["lm_loss"] + 2.0 * parts["contrast_loss"], rel=1e-5)
    assert float(loss_n) == pytest.approx(parts_n["lm_loss"] + 2.0 * parts_n["contrast_loss"], rel=1e-5)
    with torch.no_grad():   # a block that ignores u cannot tell a window's own control from the flipped one
        small_hybrid.field.alpha.zero_()
        _, blind = stage2_loss(small_hybrid, x, y, u, base)
    assert blind["contrast_loss"] == pytest.approx(math.log(2), rel=1e-6)


def test_stage2_style_axis_can_have_its_own_contrast_weight(small_hybrid):
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(1)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]])
    with torch.no_grad():
        _, sentiment_only = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_axes="sentiment"))
        shared, parts = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_weight=2.0))
        own, _ = stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_weight=2.0, style_contrast_weight=5.0))
    sentiment = sentiment_only["contrast_loss"]
    style = 2 * parts["contrast_loss"] - sentiment       # the logged contrast is the mean of the two axes
    assert float(shared) == pytest.approx(parts["lm_loss"] + (2.0 * sentiment + 2.0 * style) / 2, rel=1e-5)
    assert float(own) == pytest.approx(parts["lm_loss"] + (2.0 * sentiment + 5.0 * style) / 2, rel=1e-5)
    assert float(own) != pytest.approx(float(shared), rel=1e-4)


def test_stage2_contrast_can_judge_word_starts_only(small_hybrid, small_tokenizer):
    from steering.train import stage2_loss, word_start_tokens
    starts = word_start_tokens(small_tokenizer)
    assert starts.dtype == torch.bool and 0 < int(starts.sum()) < len(starts)
    spaced, glued = small_tokenizer.encode(" the movie").ids, small_tokenizer.encode("xqzvwkjyp").ids
    assert bool(starts[spaced[0]]) and len(glued) > 1 and not any(bool(starts[i]) for i in glued)
    small_hybrid.eval()
    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (3, 10))
    y = torch.randint(1, small_hybrid.config.vocab_size, (3, 10))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    cfg = make_config("tiny")
    with torch.no_grad():
        _, every = stage2_loss(small_hybrid, x, y, u, cfg)
        _, all_marked = stage2_loss(small_hybrid, x, y, u, cfg, contrast_token_weights={0: torch.ones_like(starts), 1: torch.ones_like(starts)})
        _, some = stage2_loss(small_hybrid, x, y, u, cfg, contrast_token_weights={0: starts, 1: starts})
        _, none = stage2_loss(small_hybrid, x, y, u, cfg, contrast_token_weights={0: torch.zeros_like(starts), 1: torch.zeros_like(starts)})
    assert all_marked["contrast_loss"] == pytest.approx(every["contrast_loss"], rel=1e-6)
    assert some["contrast_loss"] != pytest.approx(every["contrast_loss"], rel=1e-4)
    assert none["contrast_loss"] == pytest.approx(math.log(2), rel=1e-6)   # nothing judged: no preference
    assert some["lm_loss"] == pytest.approx(every["lm_loss"], rel=1e-6)    # the LM term still sees every token
    with torch.no_grad():   # masking one axis leaves the other axis's contrast as it was
        blind = torch.zeros_like(starts)
        _, sentiment_blind = stage2_loss(small_hybrid, x, y, u, cfg, contrast_token_weights={0: blind})
        _, style_blind = stage2_loss(small_hybrid, x, y, u, cfg, contrast_token_weights={1: blind})
    # every = mean(sentiment, style); each blind axis scores ln 2
    assert sentiment_blind["contrast_loss"] + style_blind["contrast_loss"] == \
        pytest.approx(every["contrast_loss"] + math.log(2), rel=1e-5)
    assert sentiment_blind["contrast_loss"] != pytest.approx(style_blind["contrast_loss"], rel=1e-4)


def test_alpha_init_reaches_the_model_from_the_training_config():
    from steering.model import build_model
    from steering.train import model_config
    assert make_config().alpha_init == 0.1
    model = build_model(model_config(make_config("tiny", alpha_init=1.0)))
    assert model.field.alpha.item() == 1.0


def test_stage1_loss_takes_the_roughness_relative_to_the_chosen_size(small_hybrid):
    from steering.ode import path_roughness
    from steering.train import stage1_loss
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


def test_neighbor_drop_leaves_out_the_blocks_beside_the_middle(small_hybrid):
    from steering.train import neighbor_skips
    never, always = make_config("tiny"), make_config("tiny", neighbor_drop=1.0)
    half = make_config("tiny", neighbor_drop=0.5)
    assert all(neighbor_skips(never, s) == (False, False) for s in range(50))
    assert all(neighbor_skips(always, s) == (True, True) for s in range(50))
    draws = [neighbor_skips(half, s) for s in range(400)]
    assert draws == [neighbor_skips(half, s) for s in range(400)]  # a function of (seed, step): resume replays it
    left_out = sum(a + b for a, b in draws) / (2 * len(draws))
    assert 0.4 < left_out < 0.6

    torch.manual_seed(0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (2, 10))
    u = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    model = small_hybrid
    with torch.no_grad():
        full, _ = model(x, u)
        skipped, _ = model(x, u, skip_neighbors=(True, True))
        h = model.wte(x) + model.wpe(torch.arange(x.shape[1]))
        for block in model.pre[:-1]:
            h = block(h)
        h = model.middle(h, u).final
        for block in model.post[1:]:
            h = block(h)
        by_hand = model.ln_f(h) @ model.wte.weight.T
    assert torch.allclose(skipped, by_hand, atol=1e-5)
    assert not torch.allclose(skipped, full, atol=1e-3)

    model.zero_grad(set_to_none=True)
    model(x, u, skip_neighbors=(True, False))[0].sum().backward()
    assert all(p.grad is None for p in model.pre[-1].parameters())
    assert all(p.grad is not None for p in model.post[0].parameters())
    model.zero_grad(set_to_none=True)


def test_stage2_can_take_its_own_roughness_penalty(small_hybrid):
    from steering.train import stage2_loss, stage2_view
    same = make_config("tiny", roughness_weight=7.0, roughness_relative_to="field")
    assert stage2_view(same) == same            # unset: stage 2 keeps stage 1's penalty
    own = make_config("tiny", roughness_weight=7.0, roughness_relative_to="field",
                      stage2_roughness_weight=500.0, stage2_roughness_relative_to="state")
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
    train(make_config("tiny", out=str(out), steps=6, stage2_steps=2, warmup=2, max_reviews=400, eval_every=3,
                      eval_reviews=16, alpha_init=0.7, train_alpha=False, tokenizer=str(tiny_run / "tokenizer.json")),
          progress=False)
    model, _, config = load_checkpoint(out)
    assert model.field.alpha.item() == pytest.approx(0.7, abs=1e-3)     # float16 on disk
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in log} == {1, 2} and all(r["alpha"] == pytest.approx(0.7) for r in log)
    assert all(r["ode_grad_norm"] > 0 for r in log)                       # the field itself still learns
    assert config["meta"]["train"]["train_alpha"] is False


def test_overlap_penalty_turns_the_fields_writes_away_from_its_reads(tiny_run, tmp_path):
    overlaps = {}
    for weight in (0.0, 20.0):
        out = tmp_path / f"overlap_{weight:g}"
        train(make_config("tiny", out=str(out), steps=8, stage2_steps=2, warmup=2, max_reviews=400, eval_every=4,
                          eval_reviews=16, overlap_weight=weight, tokenizer=str(tiny_run / "tokenizer.json")),
              progress=False)
        model, _, config = load_checkpoint(out)
        overlaps[weight] = model.field.read_write_overlap().item()
        log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
        assert all(("overlap" in r) == (weight > 0) for r in log)
        assert config["meta"]["train"]["overlap_weight"] == weight
    assert overlaps[20.0] < 0.5 * overlaps[0.0], overlaps


def test_stage2_overlap_weight_replaces_stage_ones_in_stage_two_only(tiny_run, tmp_path):
    out = tmp_path / "overlap_stage1_only"
    train(make_config("tiny", out=str(out), steps=6, stage2_steps=3, warmup=2, max_reviews=400, eval_every=3,
                      eval_reviews=16, overlap_weight=20.0, stage2_overlap_weight=0.0,
                      tokenizer=str(tiny_run / "tokenizer.json")), progress=False)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [("overlap" in r) for r in log] == [True] * 6 + [False] * 3
    assert [r["stage"] for r in log] == [1] * 6 + [2] * 3


def test_stage2_can_open_every_window_at_a_review_start(small_tokenizer):
    from steering import data
    from steering.tokenizer import bos_id
    from steering.train import enter_stage2
    split = data.encode_reviews(small_tokenizer, data.train_reviews()[::50], bos_id(small_tokenizer))

    def opening_rows(cfg):
        sampler = data.BatchSampler(split, block_size=32, tokens_per_batch=512, generator=torch.Generator().manual_seed(0))
        enter_stage2(sampler, cfg)
        batches = [sampler.sample()[0] for _ in range(20)]
        assert all(x.numel() <= cfg.stage2_tokens_per_batch for x in batches)
        rows = torch.cat([x[:, 0] for x in batches])
        return float((rows == bos_id(small_tokenizer)).float().mean())

    assert opening_rows(make_config("tiny", stage2_tokens_per_batch=256, stage2_start_prob=1.0)) == 1.0
    assert opening_rows(make_config("tiny", stage2_tokens_per_batch=256)) < 0.9   # unset: stage 1's 0.5


def test_stage2_can_take_its_own_share_of_rotten_tomatoes_blurbs(small_tokenizer):
    from steering.tokenizer import bos_id
    from steering.train import enter_stage2
    reviews = data.train_reviews()[::50]
    split = data.encode_reviews(small_tokenizer, reviews, bos_id(small_tokenizer))

    def rt_share(cfg):
        sampler = data.BatchSampler(split, block_size=32, tokens_per_batch=512, generator=torch.Generator().manual_seed(0),
                                    rt_fraction=cfg.rt_fraction)
        enter_stage2(sampler, cfg)
        styles = torch.cat([sampler.sample()[2][:, 1] for _ in range(200)])   # RT blurbs have style -1
        return float((styles < 0).sum() / (styles != 0).sum())

    assert rt_share(make_config("tiny", stage2_rt_fraction=1.0)) == 1.0
    assert rt_share(make_config("tiny", stage2_rt_fraction=0.0)) == 0.0
    unset, raised = rt_share(make_config("tiny", rt_fraction=0.4)), rt_share(make_config("tiny", rt_fraction=0.4, stage2_rt_fraction=0.8))
    assert 0.2 < unset < 0.6 < raised < 1.0   # rows, not batches: a batch is all blurbs or all IMDB


def test_stage2_negative_rows_can_weigh_more_in_the_sentiment_contrast(small_hybrid):
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(2)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 12))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]])
    sentiment_only = dict(contrast_axes="sentiment", contrast_weight=2.0)
    with torch.no_grad():   # rows are independent, so each class's mean contrast comes from its own rows
        _, positive = stage2_loss(small_hybrid, x[[0, 2]], x[[0, 2]], u[[0, 2]], make_config("tiny", **sentiment_only))
        _, negative = stage2_loss(small_hybrid, x[[1, 3]], x[[1, 3]], u[[1, 3]], make_config("tiny", **sentiment_only))
        loss, parts = stage2_loss(small_hybrid, x, x, u,
                                  make_config("tiny", negative_contrast_weight=5.0, **sentiment_only))
    assert parts["contrast_loss"] == pytest.approx((positive["contrast_loss"] + negative["contrast_loss"]) / 2, rel=1e-5)
    weighted = (2.0 * positive["contrast_loss"] + 5.0 * negative["contrast_loss"]) / 2
    assert float(loss) == pytest.approx(parts["lm_loss"] + weighted, rel=1e-5)


def test_stage2_positive_side_scale_trains_the_controls_unequally(small_hybrid):
    """Side 0: the sentiment contrast of positive windows trains the model at -1 only (value unchanged)."""
    import torch.nn.functional as F
    from steering.model import language_model_loss
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(3)
    x = torch.randint(1, small_hybrid.config.vocab_size, (3, 10))
    u = torch.tensor([[1.0, 0.0]] * 3)
    common = dict(contrast_axes="sentiment", contrast_weight=2.0, contrast_scale=3.0, stage2_neutral_lm=False)

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

    reference = language_model_loss(small_hybrid(x, u)[0], x) + \
        2.0 * F.softplus(-(mean_ll(u).detach() - mean_ll(-u))).mean()
    expected, got, both = grads(reference), grads(one_sided), grads(full)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, expected))
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, both))


def test_stage2_early_weight_weighs_a_windows_first_tokens(small_hybrid):
    """Token t's share of the contrast's per-token mean is 1 + E·exp(-t / span), normalised."""
    import torch.nn.functional as F
    from steering.model import language_model_loss
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(4)
    x = torch.randint(1, small_hybrid.config.vocab_size, (3, 10))
    u = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]])
    common = dict(contrast_axes="sentiment", contrast_weight=2.0, contrast_scale=3.0, stage2_neutral_lm=False)
    weight = 1.0 + 6.0 * torch.exp(-torch.arange(10.0) / 2.0)

    def weighted_ll(control):
        logits, _ = small_hybrid(x, control)
        nll = F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        return -(nll * weight).sum(1) / weight.sum() * 3.0

    with torch.no_grad():
        early, parts = stage2_loss(small_hybrid, x, x, u, make_config(
            "tiny", contrast_early_weight=6.0, contrast_early_span=2.0, **common))
        plain, plain_parts = stage2_loss(small_hybrid, x, x, u, make_config("tiny", **common))
        expected = F.softplus(-(weighted_ll(u) - weighted_ll(-u))).mean()
        lm = language_model_loss(small_hybrid(x, u)[0], x)
    assert parts["contrast_loss"] == pytest.approx(float(expected), rel=1e-5)
    assert float(early) == pytest.approx(float(lm + 2.0 * expected), rel=1e-5)
    assert parts["contrast_loss"] != pytest.approx(plain_parts["contrast_loss"], rel=1e-3)


def test_sentiment_log_odds_marks_the_words_that_tell_the_classes_apart():
    from steering.train import sentiment_log_odds
    # token 1 only in positive reviews, 2 only in negative ones, 3 in both alike; the unlabelled row is ignored
    split = data.EncodedSplit([torch.tensor([1, 1, 3]), torch.tensor([2, 2, 3]), torch.tensor([1, 1, 1, 1])],
                              torch.tensor([[1.0, 0.0], [-1.0, 1.0], [0.0, -1.0]]), ["rt", "imdb", "rt"])
    odds = sentiment_log_odds(split, vocab_size=5, smoothing=1.0)
    assert odds.shape == (5,)
    assert float(odds[1]) == pytest.approx(math.log(3.0), rel=1e-5)    # (2 + 1) / (0 + 1), equal totals
    assert float(odds[2]) == pytest.approx(-math.log(3.0), rel=1e-5)
    assert float(odds[3]) == pytest.approx(0.0, abs=1e-6) and float(odds[0]) == pytest.approx(0.0, abs=1e-6)


def test_contrast_token_weights_combine_word_starts_and_the_lexicon(small_tokenizer):
    from steering.tokenizer import bos_id
    from steering.train import contrast_token_weights, sentiment_log_odds, word_start_tokens
    split = data.encode_reviews(small_tokenizer, data.train_reviews()[::200], bos_id(small_tokenizer))
    vocab = small_tokenizer.get_vocab_size()
    starts = word_start_tokens(small_tokenizer).float()
    lexicon = 1.0 + 3.0 * sentiment_log_odds(split, vocab).abs()
    assert contrast_token_weights(make_config("tiny"), small_tokenizer, split) == {}
    both_axes = contrast_token_weights(make_config("tiny", contrast_tokens="word_start"), small_tokenizer, split)
    assert set(both_axes) == {0, 1} and torch.equal(both_axes[1], starts)
    combined = contrast_token_weights(make_config("tiny", contrast_tokens="word_start_sentiment", contrast_lexicon_weight=3.0,
                                                  vocab_size=vocab), small_tokenizer, split)
    assert set(combined) == {0} and torch.allclose(combined[0], starts * lexicon)


def test_stage2_lexicon_weight_weighs_the_sentiment_contrasts_tokens_only(small_hybrid):
    """A [vocab] weight enters the sentiment axis's per-token mean; the style axis and the LM term are untouched."""
    import torch.nn.functional as F
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(5)
    vocab = small_hybrid.config.vocab_size
    x = torch.randint(1, vocab, (3, 10))
    u = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]])
    common = dict(contrast_axes="sentiment", contrast_weight=2.0, contrast_scale=3.0, stage2_neutral_lm=False)
    vocab_weight = 1.0 + 4.0 * torch.rand(vocab)
    weight = vocab_weight[x]

    def weighted_ll(control):
        logits, _ = small_hybrid(x, control)
        nll = F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        return -(nll * weight).sum(1) / weight.sum(1) * 3.0

    cfg = make_config("tiny", **common)
    with torch.no_grad():
        _, parts = stage2_loss(small_hybrid, x, x, u, cfg, contrast_token_weights={0: vocab_weight})
        _, plain = stage2_loss(small_hybrid, x, x, u, cfg)
        _, uniform = stage2_loss(small_hybrid, x, x, u, cfg, contrast_token_weights={0: torch.full((vocab,), 7.0)})
        expected = F.softplus(-(weighted_ll(u) - weighted_ll(-u))).mean()
        style_u = torch.tensor([[0.0, 1.0], [0.0, -1.0], [0.0, 1.0]])
        both = make_config("tiny", contrast_weight=2.0, contrast_scale=3.0, stage2_neutral_lm=False)
        _, style_weighted = stage2_loss(small_hybrid, x, x, style_u, both, contrast_token_weights={0: vocab_weight})
        _, style_plain = stage2_loss(small_hybrid, x, x, style_u, both)
    assert parts["contrast_loss"] == pytest.approx(float(expected), rel=1e-5)
    assert parts["contrast_loss"] != pytest.approx(plain["contrast_loss"], rel=1e-3)
    assert uniform["contrast_loss"] == pytest.approx(plain["contrast_loss"], rel=1e-5)   # a weighted mean
    assert parts["lm_loss"] == pytest.approx(plain["lm_loss"], rel=1e-6)
    assert style_weighted["contrast_loss"] == pytest.approx(style_plain["contrast_loss"], rel=1e-6)


def test_stage2_neutral_kl_prices_each_sides_distance_from_u_zero(small_hybrid):
    """KL(p at sentiment ±1 || p at u = 0) per token over rows with a sentiment, added with its weight."""
    import torch.nn.functional as F
    from steering.train import stage2_loss
    small_hybrid.eval()
    torch.manual_seed(5)
    x = torch.randint(1, small_hybrid.config.vocab_size, (4, 10))
    u = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])   # row 2 has no sentiment: left out
    common = dict(contrast_scale=3.0, contrast_weight=2.0, stage2_neutral_lm=True)

    def kl_from_zero(sentiment):
        at_side = u.clone()
        at_side[:, 0] = sentiment   # every row's own style, its sentiment set to this side
        log_p = F.log_softmax(small_hybrid(x, at_side)[0], -1)
        log_q = F.log_softmax(small_hybrid(x, torch.zeros_like(u))[0], -1)
        per_token = (log_p.exp() * (log_p - log_q)).sum(-1)
        return float(per_token[[0, 1, 3]].mean())

    with torch.no_grad():
        plain, _ = stage2_loss(small_hybrid, x, x, u, make_config("tiny", **common))
        priced, parts = stage2_loss(small_hybrid, x, x, u, make_config(
            "tiny", positive_kl_weight=2.0, negative_kl_weight=0.5, **common))
        expected = 2.0 * kl_from_zero(1.0) + 0.5 * kl_from_zero(-1.0)
    assert expected > 0
    assert parts["neutral_kl"] == pytest.approx(expected, rel=1e-4)
    assert float(priced - plain) == pytest.approx(expected, abs=1e-5)  # a difference of two ~10-nat losses: fp32 cancellation
    with torch.no_grad():   # a block that ignores u puts every side at u = 0's distribution
        small_hybrid.field.alpha.zero_()
        _, blind = stage2_loss(small_hybrid, x, x, u, make_config("tiny", positive_kl_weight=2.0, **common))
    assert blind["neutral_kl"] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="stage2_neutral_lm"):
        stage2_loss(small_hybrid, x, x, u, make_config("tiny", contrast_scale=3.0, stage2_neutral_lm=False,
                                                       positive_kl_weight=1.0))


def test_stage2_split_control_trains_each_sign_and_resumes_inside_stage2(tiny_run, tmp_path, monkeypatch):
    """Stage 2 splits u's embedding (W₋ starts as W) and saves a model that loads with it; an
    interrupted stage 2 resumes to the same weights, W₋ included."""
    common = dict(steps=6, stage2_steps=4, warmup=2, max_reviews=400, eval_every=1, eval_reviews=16,
                  stage2_split_control=True, tokenizer=str(tiny_run / "tokenizer.json"))
    train(make_config("tiny", out=str(tmp_path / "straight"), **common), progress=False)
    straight, _, config = load_checkpoint(tmp_path / "straight")
    assert config["model"]["split_control"] is True
    field = straight.field
    assert not torch.allclose(field.control_embed.weight, field.control_embed_negative.weight, atol=1e-4)

    real_sample, calls = data.BatchSampler.sample, {"n": 0}

    def flaky_sample(self):
        calls["n"] += 1
        if calls["n"] == 9:   # stage 2's third step
            raise KeyboardInterrupt
        return real_sample(self)

    monkeypatch.setattr(data.BatchSampler, "sample", flaky_sample)
    with pytest.raises(KeyboardInterrupt):
        train(make_config("tiny", out=str(tmp_path / "resumed"), **common), progress=False)
    monkeypatch.setattr(data.BatchSampler, "sample", real_sample)
    assert json.loads((tmp_path / "resumed" / "resume" / "state.json").read_text())["stage"] == 2
    train(make_config("tiny", out=str(tmp_path / "resumed"), resume=True, **common), progress=False)
    resumed, _, _ = load_checkpoint(tmp_path / "resumed")
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-3), name


def test_stage2_control_lr_scale_raises_only_the_control_embeddings_lr(small_hybrid):
    from steering.train import _make_optimizer
    small_hybrid.split_control()
    opt = _make_optimizer(small_hybrid, 1e-3, 0.0, control_lr_scale=10.0)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    for name, p in small_hybrid.named_parameters():
        expected = 1e-2 if name.startswith("field.control_embed") else 1e-3
        assert lr_of[id(p)] == pytest.approx(expected), name
    assert {n for n, _ in small_hybrid.named_parameters() if n.startswith("field.control_embed")} == \
        {"field.control_embed.weight", "field.control_embed_negative.weight"}


def _train_cli(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "steering", "train", "--preset", "tiny", "--out", str(out), "--no-progress",
            "--steps", "30", "--stage2-steps", "10", "--max-reviews", "1500", "--eval-every", "10", "--bf16",
            "--save-every-s", "0", *extra]


def test_a_killed_bf16_run_resumes_with_the_uninterrupted_runs_losses(tmp_path):
    """SIGKILL at an arbitrary moment (mid-step or mid-save), then --resume: every logged loss is
    bit for bit the uninterrupted run's."""
    import time
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(_train_cli(tmp_path / "straight"), check=True, cwd=ROOT, env=env, capture_output=True)
    tokenizer = str(tmp_path / "straight" / "tokenizer.json")
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_train_cli(killed, "--tokenizer", tokenizer), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = killed / "train_log.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if log.is_file() and len(log.read_text().splitlines()) >= 17:   # in stage 1, past an eval
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(log.read_text().splitlines())
    assert done_before < 40 and (killed / "resume").is_dir() or (killed / "resume.old").is_dir()
    subprocess.run(_train_cli(killed, "--tokenizer", tokenizer, "--resume"), check=True, cwd=ROOT, env=env,
                   capture_output=True)
    straight, resumed = read_log(tmp_path / "straight"), read_log(killed)
    assert [(r["stage"], r["step"]) for r in resumed] == [(r["stage"], r["step"]) for r in straight]
    assert [r["loss"] for r in resumed] == [r["loss"] for r in straight]
    assert [r.get("val_loss") for r in resumed] == [r.get("val_loss") for r in straight]
    assert not (killed / "resume").exists() and not (killed / "resume.old").exists()


def test_bf16_training_keeps_the_solver_and_fp32_inference_agrees(tmp_path, small_tokenizer):
    from steering.ode import SolverConfig
    out = train(make_config("tiny", out=str(tmp_path / "bf16"), bf16=True, **QUICK), progress=False)
    model, tok, config = load_checkpoint(out)
    last_val = [r["val_loss"] for r in read_log(out) if "val_loss" in r][-1]
    assert last_val < config["meta"]["initial_val_loss"] - 0.5          # it learned
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
    assert (p32 - p16).abs().sum(-1).max() < 0.05               # total variation per position
    assert (p32 - p16).abs().sum(-1).max() > 0                  # bf16 did round something
