import json
import math

import torch

from steering.model.ode import SolverConfig
from steering.model.transformer import DiscreteTransformer, HybridODETransformer, ModelConfig, language_model_loss


def test_shapes_and_parameter_layout(small_hybrid, small_discrete):
    idx = torch.randint(0, small_hybrid.config.vocab_size, (3, 10))
    logits, penalties = small_hybrid(idx, torch.tensor([[1.0, -1.0]] * 3))
    assert logits.shape == (3, 10, small_hybrid.config.vocab_size)
    assert penalties == {}  # in eval mode: no penalties to train with
    _, penalties = small_hybrid.train()(idx, torch.tensor([[1.0, -1.0]] * 3))
    assert set(penalties) == {"roughness"} and penalties["roughness"].shape == ()
    small_hybrid.eval()
    logits_d, _ = small_discrete(idx)
    assert logits_d.shape == logits.shape
    assert len(small_hybrid.pre) == len(small_hybrid.post) == 2
    assert len(small_discrete.pre) + len(small_discrete.mid) + len(small_discrete.post) == 6
    assert small_hybrid.wte.weight.data_ptr() is not None
    assert small_hybrid.num_parameters() < small_discrete.num_parameters() + small_hybrid.field.fc_in.weight.numel()


def test_fresh_model_first_loss_is_near_ln_vocab_and_state_is_of_order_one():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=4096, block_size=64, d_model=128, n_heads=4, field_hidden=256)
    for model in (HybridODETransformer(cfg), DiscreteTransformer(ModelConfig(**{**cfg.to_dict(), "arch": "discrete"}))):
        idx = torch.randint(0, 4096, (4, 64))
        logits, _ = model(idx)
        loss = language_model_loss(logits, torch.randint(0, 4096, (4, 64)))
        assert abs(loss.item() - math.log(4096)) / math.log(4096) < 0.10
        h0 = model.encode(idx)
        assert 0.05 < h0.norm(dim=-1).mean().item() < 5.0


def test_alpha_initial_value(small_tokenizer):
    model = HybridODETransformer(ModelConfig(vocab_size=300, d_model=32, n_heads=2, field_hidden=64))
    assert model.field.alpha.item() == torch.tensor(0.1).item()


def test_control_reaches_the_output_only_through_the_ode_block(small_hybrid):
    idx = torch.randint(0, small_hybrid.config.vocab_size, (2, 8))
    u = torch.tensor([[0.7, -0.3], [0.2, 0.9]], requires_grad=True)
    h0 = small_hybrid.encode(idx)
    assert not h0.requires_grad or h0.grad_fn is not None
    seen = []
    small_hybrid.field.register_forward_pre_hook(lambda mod, args: seen.append(args[2]))
    logits, _ = small_hybrid(idx, u)
    logits.sum().backward()
    assert u.grad is not None and u.grad.abs().sum() > 0
    assert all(c is u or c.data_ptr() == u.data_ptr() for c in seen)
    # the blocks before the ODE never see u: H(0) is identical for any control
    assert torch.equal(small_hybrid.encode(idx), h0)
    # with the field's control path cut, u has no gradient at all
    u.grad = None
    with torch.no_grad():
        small_hybrid.field.control_embed.weight.zero_()
    logits, _ = small_hybrid(idx, u)
    logits.sum().backward()
    assert u.grad is None or u.grad.abs().sum() == 0


def test_control_changes_the_output(small_hybrid):
    idx = torch.randint(0, small_hybrid.config.vocab_size, (1, 8))
    with torch.no_grad():
        pos, _ = small_hybrid(idx, torch.tensor([[2.0, 0.0]]))
        neg, _ = small_hybrid(idx, torch.tensor([[-2.0, 0.0]]))
    assert (pos - neg).abs().max() > 1e-3


def test_cached_forward_matches_full_forward(small_hybrid, small_discrete):
    for model in (small_hybrid, small_discrete):
        idx = torch.randint(0, model.config.vocab_size, (1, 12))
        u = torch.tensor([[1.0, 0.0]])
        with torch.no_grad():
            full = model.decode(model.middle(model.encode(idx), u).final)
            caches = model.new_caches()
            first = model.decode(model.middle(model.encode(idx[:, :7], caches), u, caches=caches).final, caches)
            rest = model.decode(model.middle(model.encode(idx[:, 7:], caches, 7), u, caches=caches).final, caches)
        assert torch.allclose(torch.cat([first, rest], 1), full, atol=1e-5)


def test_solver_choice_is_a_plain_argument(small_hybrid):
    idx = torch.randint(0, small_hybrid.config.vocab_size, (1, 6))
    with torch.no_grad():
        a, _ = small_hybrid(idx, None, SolverConfig("euler", steps=64))
        b, _ = small_hybrid(idx, None, SolverConfig("dopri5", rtol=1e-7, atol=1e-7))
    assert torch.allclose(a.softmax(-1), b.softmax(-1), atol=1e-3)


def test_cached_attention_matches_full_attention_as_its_buffers_grow():
    from steering.model.attention import CausalSelfAttention

    torch.manual_seed(0)
    attn = CausalSelfAttention(32, 4).eval()
    x = torch.randn(2, 150, 32)
    with torch.no_grad():
        full = attn(x)
        cache: dict = {}
        # a 5-token prefix, then one token at a time past the first buffer size (64) and its doubling
        pieces = [attn(x[:, :5], cache)] + [attn(x[:, t : t + 1], cache) for t in range(5, 150)]
    assert cache["length"] == 150
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)


def test_split_control_starts_equal_then_lets_each_sign_move_alone(small_hybrid):
    """Splitting keeps every output; afterwards W₋ moves u < 0 and leaves u >= 0 as it was."""
    torch.manual_seed(6)
    x = torch.randint(1, small_hybrid.config.vocab_size, (3, 9))
    u = torch.tensor([[1.0, -0.5], [-1.0, 0.5], [0.0, 0.0]])
    with torch.no_grad():
        before = small_hybrid(x, u)[0]
        small_hybrid.split_control()
        assert small_hybrid.config.split_control
        assert torch.allclose(small_hybrid(x, u)[0], before, atol=1e-6)
        small_hybrid.field.control_embed_negative.weight.mul_(3.0)
        after = small_hybrid(x, u)[0]
        positive_only = small_hybrid(x, torch.tensor([[1.0, 0.5]] * 3))[0]
        small_hybrid.field.control_embed_negative.weight.div_(3.0)
        assert torch.allclose(small_hybrid(x, torch.tensor([[1.0, 0.5]] * 3))[0], positive_only, atol=1e-6)
    assert torch.allclose(after[2], before[2], atol=1e-6)  # u = 0 embeds to zero either way
    assert not torch.allclose(after[0], before[0], atol=1e-4)  # row 0's style is negative
    assert not torch.allclose(after[1], before[1], atol=1e-4)  # row 1's sentiment is negative


def _saved_and_rebuilt(model, folder):
    """model saved as a float32 checkpoint, then built again from its files: (config dict, model in eval mode)."""
    from safetensors.torch import load_file

    from steering.model.transformer import build_model
    from steering.training.checkpoint import save_checkpoint

    save_checkpoint(model, folder, dtype=torch.float32)
    loaded = json.loads((folder / "config.json").read_text())
    rebuilt = build_model(ModelConfig.from_dict(loaded["model"]))
    rebuilt.load_state_dict(load_file(str(folder / "model.safetensors")))
    return loaded, rebuilt.eval()


def test_split_control_checkpoint_round_trip(small_hybrid, tmp_path):

    small_hybrid.split_control()
    with torch.no_grad():
        small_hybrid.field.control_embed_negative.weight.mul_(2.0)
    x = torch.randint(1, small_hybrid.config.vocab_size, (2, 7))
    u = torch.tensor([[-1.0, 0.0], [1.0, 0.0]])
    loaded, rebuilt = _saved_and_rebuilt(small_hybrid, tmp_path)
    assert loaded["model"]["split_control"] is True
    small_hybrid.eval()
    with torch.no_grad():
        assert torch.allclose(rebuilt(x, u)[0], small_hybrid(x, u)[0], atol=1e-5)


def test_beyond_steering_changes_nothing_until_trained_then_only_beyond_one(small_hybrid, tmp_path):
    """add_beyond_steering keeps every output; trained, it moves |u| > 1 and leaves |u| <= 1 as it was."""

    torch.manual_seed(7)
    x = torch.randint(1, small_hybrid.config.vocab_size, (5, 9))
    inside = torch.tensor([[1.0, -1.0], [-1.0, 0.5], [0.0, 0.0], [0.3, 1.0], [-0.7, -0.2]])
    beyond = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.5], [0.0, -3.0], [1.2, -1.2]])
    with torch.no_grad():
        before_inside, before_beyond = small_hybrid(x, inside)[0], small_hybrid(x, beyond)[0]
        small_hybrid.add_beyond_steering()
        assert small_hybrid.config.beyond_steering
        assert torch.allclose(small_hybrid(x, beyond)[0], before_beyond, atol=1e-6)
        small_hybrid.field.beyond_positive.weight.normal_()
        small_hybrid.field.beyond_negative.weight.normal_()
        assert torch.allclose(small_hybrid(x, inside)[0], before_inside, atol=1e-6)
        after_beyond = small_hybrid(x, beyond)[0]
    for row in range(len(beyond)):  # every row has one axis beyond ±1, on either side
        assert not torch.allclose(after_beyond[row], before_beyond[row], atol=1e-4), row
    loaded, rebuilt = _saved_and_rebuilt(small_hybrid, tmp_path)
    assert loaded["model"]["beyond_steering"] is True
    with torch.no_grad():
        assert torch.allclose(rebuilt(x, beyond)[0], after_beyond, atol=1e-5)
