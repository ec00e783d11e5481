import pytest
import torch

from steering.inference.generate import generate
from steering.inference.sampling import GREEDY, filter_logits
from steering.model.ode import SolverConfig


@pytest.mark.parametrize(
    "fixture,solver",
    [
        ("small_hybrid", SolverConfig()),
        ("small_discrete", SolverConfig()),
        ("small_mixing_hybrid", SolverConfig()),
        ("small_mixing_hybrid", SolverConfig("rk4", steps=3)),
        ("small_entry_hybrid", SolverConfig()),
    ],
)
def test_cached_and_uncached_sampling_give_the_same_tokens(fixture, solver, small_tokenizer, request):
    model = request.getfixturevalue(fixture)
    # no top-k cut: at one thread small_entry_hybrid's 50th and 51st logits come within the two paths' rounding
    # (1.5e-7), and top_k=50 turned that into another token; the draw itself moves only within 1e-7 of a boundary
    kwargs = dict(sentiment=1.0, n=3, max_new_tokens=20, temperature=1.0, top_k=0, top_p=0.95, seed=7, solver=solver)
    cached = generate(model, small_tokenizer, "The movie was", use_cache=True, **kwargs)
    uncached = generate(model, small_tokenizer, "The movie was", use_cache=False, **kwargs)
    assert [g.tokens for g in cached] == [g.tokens for g in uncached]
    assert len({tuple(g.tokens) for g in cached}) > 1  # the n samples differ from each other


def test_same_seed_same_text_and_control_changes_it(small_hybrid, small_tokenizer):
    a = generate(small_hybrid, small_tokenizer, "I thought", sentiment=2.0, seed=3)[0]
    b = generate(small_hybrid, small_tokenizer, "I thought", sentiment=2.0, seed=3)[0]
    c = generate(small_hybrid, small_tokenizer, "I thought", sentiment=-2.0, seed=3)[0]
    assert a.text == b.text
    assert a.text.startswith("I thought")
    assert c.tokens != a.tokens
    assert a.nfe == 4 * 40  # 4 Euler steps for each of the 40 new tokens (cache: one token per solve)


def test_empty_prompt_starts_from_bos(small_hybrid, small_tokenizer):
    out = generate(small_hybrid, small_tokenizer, "", max_new_tokens=5)[0]
    assert len(out.tokens) == 5 and out.text == out.continuation


def test_long_prompt_keeps_its_tail_and_says_so(small_hybrid, small_tokenizer):
    prompt = "word " * 200 + "the end"
    out = generate(small_hybrid, small_tokenizer, prompt, max_new_tokens=10)[0]
    assert "dropped" in out.notice
    assert out.text.rstrip().endswith(out.continuation.rstrip())
    assert "the end" in out.text


def test_odd_text_works(small_hybrid, small_tokenizer):
    out = generate(small_hybrid, small_tokenizer, "Ünïcødé 🎬🍿 \x00\x07 \u202e tabs\tand\nlines", max_new_tokens=4)
    assert len(out[0].tokens) == 4


def test_adaptive_solver_generation_reports_its_nfe(small_hybrid, small_tokenizer):
    out = generate(small_hybrid, small_tokenizer, "Great", max_new_tokens=3, solver=SolverConfig("dopri5"))[0]
    assert out.nfe >= 3 * 6  # at least one dopri5 step (6 evaluations) per token


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sentiment=5.0), "range|lie in"),
        (dict(style=float("nan")), "finite"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(max_new_tokens=10_000), "max_new_tokens"),
        (dict(temperature=-1.0), "temperature"),
        (dict(top_p=0.0), "top_p"),
    ],
)
def test_bad_sampling_arguments_are_refused(small_hybrid, small_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(small_hybrid, small_tokenizer, "hello", **kwargs)


def test_step_cap_is_reported_not_hung(small_hybrid, small_tokenizer):
    from steering.model.ode import SolverStepLimitError

    with pytest.raises(SolverStepLimitError, match="max_steps"):
        generate(
            small_hybrid,
            small_tokenizer,
            "hello",
            max_new_tokens=2,
            solver=SolverConfig("dopri5", rtol=1e-12, atol=1e-12, max_steps=2),
        )


def test_top_k_and_top_p_filtering():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert torch.isinf(filter_logits(logits, 1.0, 2, None)[0, 2:]).all()
    kept = filter_logits(logits, 1.0, None, 0.5)
    assert torch.isfinite(kept[0, 0]) and torch.isinf(kept[0, 1:]).all()  # top token alone holds > 50%


def test_token_mixing_field_caches_only_where_that_is_exact(small_mixing_hybrid, small_tokenizer):
    model = small_mixing_hybrid
    assert model.can_cache(SolverConfig("euler", steps=4)) and not model.can_cache(SolverConfig("dopri5"))
    ids = torch.tensor([[1, 5, 9, 17]])
    caches = model.new_caches()
    with pytest.raises(ValueError, match="fixed-step solver"):
        model.middle(model.encode(ids, caches), torch.zeros(2), SolverConfig("dopri5"), caches=caches)
    # generation with an adaptive solver integrates the whole sequence each step instead of failing
    out = generate(
        model,
        small_tokenizer,
        "The movie was",
        sentiment=1.0,
        max_new_tokens=5,
        solver=SolverConfig("dopri5", rtol=1e-3, atol=1e-4),
        use_cache=True,
    )[0]
    assert len(out.tokens) == 5 and out.nfe > 5


def test_no_repeat_ngram_bans_every_token_that_would_repeat_an_ngram(small_hybrid, small_tokenizer):
    from steering.inference.sampling import Sampling

    # greedy decoding of a random model loops; the ban must break every repeated token trigram
    plain = generate(small_hybrid, small_tokenizer, "the the the", max_new_tokens=30, sampling=GREEDY)[0]
    banned = generate(
        small_hybrid,
        small_tokenizer,
        "the the the",
        max_new_tokens=30,
        sampling=Sampling(temperature=0.0, top_k=None, no_repeat_ngram=3),
    )[0]

    def repeats(ids):
        grams = list(zip(ids, ids[1:], ids[2:]))
        return len(grams) - len(set(grams))

    prompt = [0] + small_tokenizer.encode("the the the", add_special_tokens=False).ids  # BOS + prompt
    assert repeats(prompt + plain.tokens) > 0
    # the prompt's own repeats stay; no generated token adds one
    assert repeats(prompt + banned.tokens) == repeats(prompt)


def test_repetition_penalty_lowers_only_tokens_already_in_the_text():
    from steering.inference.sampling import Sampling, penalize_repeats

    logits = torch.tensor([[2.0, -1.0, 3.0, 0.5]])
    history = torch.tensor([[0, 1]])
    out = penalize_repeats(logits, history, Sampling(repetition_penalty=2.0))
    assert out.tolist() == [[1.0, -2.0, 3.0, 0.5]]
    assert torch.equal(penalize_repeats(logits, history, Sampling()), logits)


def test_the_n_gram_ban_forbids_exactly_the_tokens_that_would_repeat_an_n_gram():
    from steering.inference.sampling import Sampling, penalize_repeats

    history = torch.tensor([[1, 2, 3, 1, 2], [4, 2, 5, 4, 2], [1, 2, 3, 4, 5]])
    logits = torch.zeros(3, 8)

    def banned(n):
        return torch.isinf(penalize_repeats(logits, history, Sampling(no_repeat_ngram=n))).nonzero().tolist()

    assert banned(3) == [[0, 3], [1, 5]]  # "1 2" -> 3 and "4 2" -> 5 seen; row 2's "4 5" never
    assert banned(2) == [[0, 3], [1, 5]]  # "2" was followed by 3 (row 0) and by 5 (row 1)
    assert banned(1) == sorted([r, t] for r in range(3) for t in set(history[r].tolist()))
    assert banned(6) == [] and torch.equal(penalize_repeats(logits, history, Sampling()), logits)


def test_one_generator_per_row_draws_what_each_row_draws_alone():
    """next_tokens with a generator per row: each row's token and generator state as when that row is drawn
    alone, for the app's sampling and for plain temperature sampling."""
    from steering.inference.sampling import DEFAULT_SAMPLING, Sampling, next_tokens

    rows, vocab = 40, 8192
    torch.manual_seed(0)
    history = torch.randint(0, vocab, (rows, 30))
    history[:, -3:] = history[:, 5:8]  # repeated text: the n-gram ban and the penalty both act
    for sampling in (DEFAULT_SAMPLING, Sampling(temperature=1.0, top_k=None)):
        for trial in range(5):
            logits = torch.randn(rows, vocab) * 3
            batched_gens = [torch.Generator().manual_seed(100 * trial + r) for r in range(rows)]
            alone_gens = [torch.Generator().manual_seed(100 * trial + r) for r in range(rows)]
            batched = next_tokens(logits, history, sampling, batched_gens)
            alone = torch.cat(
                [next_tokens(logits[r : r + 1], history[r : r + 1], sampling, g) for r, g in enumerate(alone_gens)]
            )
            assert torch.equal(batched, alone)
            assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(batched_gens, alone_gens))
    # the penalty touches the seen tokens only, each once however often it was seen
    from steering.inference.sampling import penalize_repeats

    logits = torch.randn(rows, vocab)
    out = penalize_repeats(logits, history, Sampling(repetition_penalty=1.5))
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, history, True)
    expected = torch.where(seen, torch.where(logits > 0, logits / 1.5, logits * 1.5), logits)
    assert torch.equal(out, expected)


def test_the_draws_follow_the_filtered_softmax():
    """The race over the top-k candidates draws each token as often as softmax(logits / T) restricted to the
    top k (and the top-p cut) says, and never one outside them; one generator for all rows or one per row."""
    from steering.inference.sampling import Sampling, next_tokens

    vocab, draws = 50, 20000
    logits = torch.linspace(2.0, -3.0, vocab)[torch.randperm(vocab, generator=torch.Generator().manual_seed(1))]
    history = torch.zeros(draws, 1, dtype=torch.long)
    for sampling in (Sampling(temperature=0.7, top_k=6), Sampling(temperature=1.0, top_k=None, top_p=0.6)):
        expected = filter_logits(logits[None], sampling.temperature, sampling.top_k, sampling.top_p).softmax(-1)[0]
        for gen in (torch.Generator().manual_seed(2), [torch.Generator().manual_seed(s) for s in range(draws)]):
            tokens = next_tokens(logits.expand(draws, vocab), history, sampling, gen)[:, 0]
            seen = torch.bincount(tokens, minlength=vocab).float() / draws
            assert (seen[expected == 0] == 0).all()
            # binomial standard error at 20,000 draws is at most 0.0036: five of them
            assert (seen - expected).abs().max() < 0.018, (sampling, (seen - expected).abs().max())


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(repetition_penalty=0.5), "repetition_penalty"),
        (dict(no_repeat_ngram=-1), "no_repeat_ngram"),
        (dict(temperature=-1.0), "temperature"),
    ],
)
def test_bad_sampling_settings_are_refused(kwargs, message):
    from steering.inference.sampling import Sampling

    with pytest.raises(ValueError, match=message):
        Sampling(**kwargs)
