"""The fast decoder (steering/inference/decode.py): the general path's tokens, from fused ops on a static cache."""

import pytest
import torch

from steering.inference.decode import can_decode_fast, fast_sample_tokens, new_stepper, packed
from steering.inference.generate import generate, sample_tokens
from steering.inference.sampling import GREEDY, Cancelled, Sampling
from steering.model.ode import SolverConfig

MODELS = ("small_hybrid", "small_mixing_hybrid", "small_entry_hybrid", "small_depth_hybrid", "small_discrete")
FIXED = (
    SolverConfig("euler", steps=4),
    SolverConfig("euler", steps=3),
    SolverConfig("midpoint", steps=2),
    SolverConfig("rk4", steps=2),
)
SAMPLED = Sampling(temperature=1.0, top_k=50, top_p=0.95)


def _both(model, solver, sampling, n=1, seed=7, prompt=(1, 5, 9, 17, 3), new=20, u=(1.0, -0.5)):
    kwargs = dict(n=n, sampling=sampling, seed=seed, solver=solver)
    u = torch.tensor([u])
    fast, nfe_fast = sample_tokens(model, list(prompt), u, new, fast=True, **kwargs)
    general, nfe_general = sample_tokens(model, list(prompt), u, new, fast=False, **kwargs)
    return fast, general, nfe_fast, nfe_general


@pytest.mark.parametrize("fixture", MODELS)
@pytest.mark.parametrize("solver", FIXED, ids=lambda s: s.label())
def test_fast_greedy_decoding_gives_the_general_paths_tokens(fixture, solver, request):
    model = request.getfixturevalue(fixture)
    fast, general, nfe_fast, nfe_general = _both(model, solver, GREEDY, new=30)
    assert torch.equal(fast, general)
    assert nfe_fast == nfe_general > 0


@pytest.mark.parametrize("fixture", MODELS)
@pytest.mark.parametrize("solver", FIXED[:2] + FIXED[3:], ids=lambda s: s.label())
def test_fast_sampling_draws_the_same_tokens_for_the_same_seed(fixture, solver, request):
    model = request.getfixturevalue(fixture)
    for seed in (0, 7):
        fast, general, _, _ = _both(model, solver, SAMPLED, n=3, seed=seed)
        assert torch.equal(fast, general)
        assert len({tuple(row) for row in fast.tolist()}) > 1  # the rows are real, different samples
    other, _, _, _ = _both(model, solver, SAMPLED, n=3, seed=8)
    assert not torch.equal(other, fast)


@pytest.mark.parametrize("fixture", ("small_entry_hybrid", "small_discrete"))
def test_repetition_controls_and_generate_agree_on_both_paths(fixture, small_tokenizer, request):
    model = request.getfixturevalue(fixture)
    sampling = Sampling(temperature=0.9, top_k=20, repetition_penalty=1.3, no_repeat_ngram=2)
    fast, general, _, _ = _both(model, SolverConfig(), sampling, n=2, new=25)
    assert torch.equal(fast, general)
    kwargs = dict(sentiment=-1.5, style=0.5, n=2, max_new_tokens=12, seed=3)
    assert [g.tokens for g in generate(model, small_tokenizer, "The movie was", **kwargs)] == [
        g.tokens for g in generate(model, small_tokenizer, "The movie was", fast=False, **kwargs)
    ]


@pytest.mark.parametrize(
    "fixture, solver",
    [("small_entry_hybrid", SolverConfig()), ("small_depth_hybrid", SolverConfig("rk4", steps=1))],
)
def test_fast_logits_match_the_general_forward(fixture, solver, request):
    model = request.getfixturevalue(fixture)
    idx = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    u = torch.tensor([[1.0, 0.0], [-2.0, 0.5]])
    with torch.no_grad():
        general = model(idx, u, solver)[0]
    with torch.inference_mode():
        step = new_stepper(model, 2, u, solver)
        prefill = step(idx[:, :8], 0, every_token=True)
        following = [step(idx[:, t : t + 1], t) for t in range(8, 12)]
    assert torch.allclose(prefill, general[:, :8], atol=1e-5, rtol=1e-5)
    for t, logits in zip(range(8, 12), following):
        assert torch.allclose(logits, general[:, t], atol=1e-5, rtol=1e-5)


def test_rows_with_their_own_generators_match_one_call_per_row(small_entry_hybrid):
    model = small_entry_hybrid
    controls = torch.tensor([[-2.0, 0.0], [0.0, 0.0], [1.5, -1.0]])
    gens = [torch.Generator().manual_seed(5) for _ in range(3)]
    batched, _ = fast_sample_tokens(
        model, [1, 4, 9], controls, 15, n=3, sampling=SAMPLED, solver=SolverConfig(), gens=gens
    )
    for row, u in zip(batched, controls):
        alone, _ = sample_tokens(model, [1, 4, 9], u[None], 15, sampling=SAMPLED, seed=5, fast=False)
        assert row.tolist() == alone[0].tolist()


def test_adaptive_solvers_keep_the_general_path(small_entry_hybrid, small_hybrid):
    adaptive = SolverConfig("dopri5", rtol=1e-3, atol=1e-4)
    assert not can_decode_fast(small_entry_hybrid, adaptive) and can_decode_fast(small_entry_hybrid, SolverConfig())
    with pytest.raises(ValueError, match="fixed-step"):
        new_stepper(small_entry_hybrid, 1, torch.zeros(1, 2), adaptive)
    fast, general, _, _ = _both(small_hybrid, adaptive, GREEDY, new=4)  # generate falls back by itself
    assert torch.equal(fast, general)


def test_cancelled_decoding_stops_between_tokens(small_entry_hybrid):
    polls = []

    def cancelled():
        polls.append(1)
        return len(polls) >= 3

    with pytest.raises(Cancelled):
        fast_sample_tokens(
            small_entry_hybrid,
            [1, 2, 3],
            torch.zeros(1, 2),
            30,
            sampling=GREEDY,
            solver=SolverConfig(),
            cancelled=cancelled,
        )
    assert len(polls) == 3


@pytest.mark.parametrize(
    "fixture, output_weight", [("small_entry_hybrid", "fc_out.weight"), ("small_depth_hybrid", "fc_out_weight")]
)
def test_packed_weights_follow_the_parameters(fixture, output_weight, request):
    model = request.getfixturevalue(fixture)
    first = packed(model)
    assert packed(model) is first  # kept while nothing changes
    solver = model.training_solver
    before, _, _, _ = _both(model, solver, GREEDY)
    with torch.no_grad():
        model.field.get_parameter(output_weight).mul_(-3.0)
        model.post[0].fc.weight.add_(0.05)
    assert packed(model) is not first
    after, general, _, _ = _both(model, solver, GREEDY)
    assert torch.equal(after, general) and not torch.equal(after, before)


def test_a_prompt_that_fills_the_context_decodes_to_its_end(small_entry_hybrid):
    model = small_entry_hybrid
    size = model.config.block_size
    prompt = list(range(1, size - 5))
    fast, general, _, _ = _both(model, SolverConfig(), GREEDY, prompt=prompt, new=5)
    assert fast.shape == (1, 5) and torch.equal(fast, general)


def test_a_sequence_past_the_context_is_refused_on_both_paths(small_entry_hybrid):
    size = small_entry_hybrid.config.block_size
    for fast in (True, False):
        with pytest.raises(ValueError, match="exceeds the context"):
            sample_tokens(small_entry_hybrid, list(range(1, size)), torch.zeros(1, 2), 3, sampling=GREEDY, fast=fast)


def test_fast_decoding_steers_beyond_one_as_the_general_path_does(small_entry_hybrid):
    """With directions for |u| > 1 (ode.add_beyond_steering), u = 2 takes them on both paths."""
    model = small_entry_hybrid
    model.add_beyond_steering()
    with torch.no_grad():
        model.field.beyond_positive.weight.normal_(std=2.0)
        model.field.beyond_negative.weight.normal_(std=2.0)
    for u in ((2.0, 0.0), (-2.0, 1.5)):
        fast, general, _, _ = _both(model, SolverConfig(), GREEDY, new=25, u=u)
        assert torch.equal(fast, general)
    idx = torch.randint(0, model.config.vocab_size, (1, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        at_two = model(idx, torch.tensor([[2.0, 0.0]]))[0]
        model.field.beyond_positive.weight.zero_()
        assert not torch.allclose(model(idx, torch.tensor([[2.0, 0.0]]))[0], at_two, atol=1e-4)
