"""Shared fixtures: small random models and a small tokenizer, so tests never need the shipped weights."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from steering.data import reviews as data
from steering.data.tokenizer import train_tokenizer
from steering.model.transformer import DiscreteTransformer, HybridODETransformer, ModelConfig

# scripts/test.sh runs the files on two xdist workers, handed out in collection order: the slowest go first, so that
# neither worker is left with a long file at the end (longest processing time first). Seconds per file in one
# process, 2026-12-07, AMD EPYC: browser 75, train_distributed 71, train 66, app_pages 57, talk_script_browser 57,
# experiments 42, user_model 36, compare 36, device_scripts 33, shipped_model 29, cli 29, bench 27; the rest < 20.
SLOW_FIRST = (
    "test_browser.py",
    "test_train_distributed.py",
    "test_train.py",
    "test_app_pages.py",
    "test_talk_script_browser.py",
    "test_experiments.py",
    "test_user_model.py",
    "test_compare.py",
    "test_device_scripts.py",
    "test_shipped_model.py",
    "test_cli.py",
    "test_bench.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order


SMALL = dict(vocab_size=300, block_size=48, d_model=32, n_heads=2, field_hidden=64, control_embed_dim=8)


@pytest.fixture(scope="session")
def small_tokenizer():
    texts = [r.text for r in data.train_reviews()[::100]]
    return train_tokenizer(texts, vocab_size=300)


def _trained_looking(model: torch.nn.Module, seed: int):
    """A random model whose vector field is not near zero, so solvers have something to integrate."""
    torch.manual_seed(seed)
    if hasattr(model, "field"):
        torch.nn.init.normal_(model.field.fc_out.weight, std=0.05)
        with torch.no_grad():
            model.field.alpha.fill_(0.5)
    return model.eval()


@pytest.fixture
def small_hybrid(small_tokenizer):
    torch.manual_seed(0)
    cfg = ModelConfig(arch="hybrid", **{**SMALL, "vocab_size": small_tokenizer.get_vocab_size()})
    return _trained_looking(HybridODETransformer(cfg), 0)


@pytest.fixture
def small_mixing_hybrid(small_tokenizer):
    """A hybrid whose field also attends over the tokens, laid out 1 block + ODE + 1 block."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="hybrid",
        field_heads=2,
        n_pre=1,
        n_mid=4,
        n_post=1,
        **{**SMALL, "vocab_size": small_tokenizer.get_vocab_size()},
    )
    model = HybridODETransformer(cfg)
    torch.nn.init.normal_(model.field.mix.proj.weight, std=0.1)
    return _trained_looking(model, 0)


@pytest.fixture
def small_entry_hybrid(small_tokenizer):
    """As small_mixing_hybrid, with the field normalised by each token's statistics at H(0)."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="hybrid",
        field_heads=2,
        field_norm="entry",
        n_pre=1,
        n_mid=4,
        n_post=1,
        **{**SMALL, "vocab_size": small_tokenizer.get_vocab_size()},
    )
    model = HybridODETransformer(cfg)
    torch.nn.init.normal_(model.field.mix.proj.weight, std=0.1)
    return _trained_looking(model, 0)


@pytest.fixture
def small_depth_hybrid(small_tokenizer):
    """A hybrid whose field's weights vary with τ (4 Legendre terms, trained with RK4), 1 block + ODE + 1 block,
    with |u| > 1 directions; every coefficient random, so the field differs along τ and the paths bend."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="hybrid",
        field_heads=2,
        field_basis=4,
        solver="rk4",
        solver_steps=1,
        alpha_init=1.0,
        beyond_steering=True,
        n_pre=1,
        n_mid=4,
        n_post=1,
        **{**SMALL, "vocab_size": small_tokenizer.get_vocab_size()},
    )
    model = HybridODETransformer(cfg)
    with torch.no_grad():
        for name in ("fc_out_weight", "proj_weight", "control_weight"):
            torch.nn.init.normal_(getattr(model.field, name), std=0.05)
        torch.nn.init.normal_(model.field.beyond_positive.weight, std=0.3)
        torch.nn.init.normal_(model.field.beyond_negative.weight, std=0.3)
    return model.eval()


@pytest.fixture
def small_discrete(small_tokenizer):
    torch.manual_seed(0)
    cfg = ModelConfig(arch="discrete", **{**SMALL, "vocab_size": small_tokenizer.get_vocab_size()})
    return DiscreteTransformer(cfg).eval()


@pytest.fixture
def small_checkpoint(tmp_path, small_hybrid, small_tokenizer):
    from steering.training.checkpoint import save_checkpoint

    return save_checkpoint(small_hybrid, tmp_path / "ckpt", small_tokenizer, dtype=torch.float32)


@pytest.fixture(scope="session")
def tiny_trained_pair(tmp_path_factory):
    """A few real training steps of each architecture, sharing one tokenizer (real logs, both stages)."""
    from steering.training.train import make_config, train

    root = tmp_path_factory.mktemp("tiny_pair")
    short = dict(steps=8, max_reviews=400, eval_every=4, eval_reviews=16, warmup=2)
    hybrid = train(make_config("tiny", out=str(root / "hybrid"), stage2_steps=3, **short), progress=False)
    discrete = train(
        make_config(
            "tiny", arch="discrete", out=str(root / "discrete"), tokenizer=str(hybrid / "tokenizer.json"), **short
        ),
        progress=False,
    )
    return hybrid, discrete
