"""The Steer page's views computed several controls at a time (steering.lab.compute.compute_steer_views)."""

import numpy as np
import pytest

from steering.inference.sampling import Cancelled
from steering.lab import compute
from steering.model.ode import SolverConfig

CONTROLS = [(-2.0, 0.0), (-0.05, 0.0), (0.5, 1.0), (2.0, 0.0)]


@pytest.fixture
def pca(small_entry_hybrid, small_tokenizer):
    from steering.analysis.pca import fit_pca_map

    return fit_pca_map(small_entry_hybrid, small_tokenizer, ["The movie was"], [-1.0, 1.0])


def _general_view(model, tok, pca, prompt, control, solver, max_new_tokens):
    """The view from the general functions: generate (general path), next_token_distribution, compute_path."""
    from steering.analysis.pca import project_trajectory
    from steering.analysis.sweep import next_token_distribution
    from steering.analysis.trajectories import compute_path
    from steering.inference.generate import generate

    gen = generate(
        model,
        tok,
        prompt,
        control[0],
        control[1],
        max_new_tokens=max_new_tokens,
        seed=0,
        solver=solver,
        fast=False,
    )[0]
    tokens, probs = next_token_distribution(model, tok, prompt, list(control), solver, top_k=10)
    traj = compute_path(model, tok, prompt, list(control), solver, n_tau=33, line="solver")
    return gen, list(tokens), probs, project_trajectory(pca, traj).points, traj


@pytest.mark.parametrize(
    "solver", [SolverConfig("euler", steps=4), SolverConfig("rk4", steps=2)], ids=lambda s: s.label()
)
def test_batched_views_equal_the_general_functions_control_by_control(small_entry_hybrid, small_tokenizer, pca, solver):
    model, tok = small_entry_hybrid, small_tokenizer
    views = compute.compute_steer_views(model, tok, pca, "The movie was", CONTROLS, solver, max_new_tokens=16)
    assert len({v.continuation for v in views}) > 1
    for control, view in zip(CONTROLS, views):
        gen, tokens, probs, path, traj = _general_view(model, tok, pca, "The movie was", control, solver, 16)
        assert view.continuation == gen.continuation and view.prompt_shown + view.continuation == gen.text
        assert view.generation_nfe == gen.nfe
        assert view.next_tokens == tokens and np.allclose(view.next_probs, probs, atol=1e-6)
        assert np.allclose(view.path, path, atol=1e-5)
        # the solver's step ends, marked on the path: τ = 0, 1/N, ..., 1
        assert len(view.stations) == solver.steps + 1
        assert np.allclose(view.stations, pca.project(traj.stations.mean(axis=1)), atol=1e-5)
        assert view.solve_nfe == traj.nfe and view.eval_taus == traj.eval_taus and view.tau == list(traj.tau)
        single = compute.compute_steer_view(model, tok, pca, "The movie was", control, solver, max_new_tokens=16)
        assert single.continuation == view.continuation and single.next_tokens == view.next_tokens


def test_a_prompt_cut_for_generation_still_gets_its_own_next_token_odds(small_entry_hybrid, small_tokenizer, pca):
    from steering.analysis.sweep import next_token_distribution

    prompt = "the film " * 30  # longer than the context leaves room for with 16 new tokens
    views = compute.compute_steer_views(
        small_entry_hybrid, small_tokenizer, pca, prompt, CONTROLS[:2], SolverConfig(), max_new_tokens=16
    )
    assert "dropped" in views[0].generation_notice
    tokens, probs = next_token_distribution(
        small_entry_hybrid, small_tokenizer, prompt, list(CONTROLS[0]), SolverConfig(), top_k=10
    )
    assert views[0].next_tokens == list(tokens) and np.allclose(views[0].next_probs, probs, atol=1e-6)
    # and its own path: the prompt as the page takes it (its tail), solved apart from the generation's prompt pass
    _, _, _, path, traj = _general_view(
        small_entry_hybrid, small_tokenizer, pca, prompt, CONTROLS[0], SolverConfig(), max_new_tokens=16
    )
    assert np.allclose(views[0].path, path, atol=1e-5) and views[0].solve_nfe == traj.nfe
    assert np.allclose(views[0].stations, pca.project(traj.stations.mean(axis=1)), atol=1e-5)


def test_views_stop_when_cancelled(small_entry_hybrid, small_tokenizer, pca):
    polls = []
    with pytest.raises(Cancelled):
        compute.compute_steer_views(
            small_entry_hybrid,
            small_tokenizer,
            pca,
            "The movie was",
            CONTROLS,
            SolverConfig(),
            cancelled=lambda: polls.append(1) or len(polls) > 4,
        )
    assert len(polls) == 5


def test_adaptive_solver_views_are_computed_one_by_one(small_entry_hybrid, small_tokenizer, pca):
    solver = SolverConfig("dopri5", rtol=1e-3, atol=1e-4)
    views = compute.compute_steer_views(
        small_entry_hybrid, small_tokenizer, pca, "The movie was", CONTROLS[:2], solver, max_new_tokens=4
    )
    assert [v.solve_nfe > 6 for v in views] == [True, True] and views[0].solver_label.startswith("dopri5")


def test_judgements_are_attached_in_one_batch(small_entry_hybrid, small_tokenizer, pca):
    views = compute.attach_judgements(
        compute.compute_steer_views(
            small_entry_hybrid, small_tokenizer, pca, "The movie was", CONTROLS[:2], SolverConfig(), max_new_tokens=8
        )
    )
    for view in views:
        alone = compute.judge_text(view.prompt_shown + view.continuation)
        assert view.judgement == alone
