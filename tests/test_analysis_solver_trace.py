import math

import numpy as np
import pytest
import torch
from torchdiffeq._impl.misc import _optimal_step_size

from steering.analysis.regimes import nfe_regimes
from steering.analysis.solver_trace import (
    change_along_path,
    curvature_by_level,
    field_geometry,
    field_under_control,
    level_causes,
    levels_reading,
    neighbour_across_switch,
    solver_trace,
    solver_traces,
    trace_reading,
    turn_rate,
)
from steering.data.heldout import PROBE_PROMPT_VARIANTS
from steering.model.ode import SolverConfig, SolverStepLimitError

H0 = torch.linspace(-1, 1, 12).view(1, 3, 4)


def oscillating(t, y):
    """A field the first-step guess misjudges: dopri5 rejects steps on it."""
    return y * torch.sin(40 * t) * 5


class Counted:
    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, t, y):
        self.calls += 1
        return self.f(t, y)


@pytest.mark.parametrize("method, order", [("dopri5", 5), ("bosh3", 3), ("adaptive_heun", 2)])
def test_the_trace_reproduces_every_decision_and_step_size_of_the_solver(method, order):
    counted = Counted(oscillating)
    trace = solver_trace(counted, H0, SolverConfig(method, rtol=1e-4, atol=1e-5))
    assert trace.rejected and trace.accepted  # the case worth checking: both decisions happen
    assert trace.nfe == counted.calls  # NFE follows from the trace
    for step, after in zip(trace.steps, trace.steps[1:]):
        assert step.accepted == (step.error_ratio <= 1)
        # the solver sized the next attempt from this error ratio: torchdiffeq's own rule gives it back
        h = torch.tensor(step.h, dtype=torch.float64)
        expected = _optimal_step_size(
            h, torch.tensor(step.error_ratio, dtype=torch.float64), 0.9, torch.tensor(10.0), torch.tensor(0.2), order
        )
        assert after.tau == pytest.approx(step.tau + step.h if step.accepted else step.tau, abs=1e-12)
        assert after.h == pytest.approx(min(float(expected), 1.0 - after.tau), rel=1e-6)  # shortened to land on 1
    # the last step lands on τ = 1 rather than running past it (ode.adaptive_options)
    assert trace.steps[-1].accepted and trace.steps[-1].tau + trace.steps[-1].h == pytest.approx(1.0, abs=1e-12)
    assert trace.steps[0].h == pytest.approx(min(100 * trace.first_step.h0, trace.first_step.h1), rel=1e-6)
    assert "rejected" in trace_reading(trace)


def test_a_trace_needs_an_adaptive_solver_and_keeps_the_step_cap():
    with pytest.raises(ValueError, match="adaptive"):
        solver_trace(oscillating, H0, SolverConfig("rk4", steps=4))
    with pytest.raises(SolverStepLimitError, match="max_steps=3"):
        solver_trace(oscillating, H0, SolverConfig("dopri5", rtol=1e-6, atol=1e-7, max_steps=3))


def test_trace_nfe_equals_the_regimes_nfe_at_every_u_over_the_probe_prompts(small_hybrid, small_tokenizer):
    grid = np.linspace(-2.0, 2.0, 5)
    assert len(PROBE_PROMPT_VARIANTS) == 10
    for prompt in PROBE_PROMPT_VARIANTS:
        traces = solver_traces(small_hybrid, small_tokenizer, prompt, grid)
        regimes = nfe_regimes(small_hybrid, small_tokenizer, prompt, grid, solvers=("dopri5",))
        np.testing.assert_array_equal(traces.nfe, regimes.nfe["dopri5"])
        np.testing.assert_array_equal([len(t.accepted) for t in traces.traces], regimes.steps["dopri5"])


def test_a_solve_without_rejections_reads_its_first_step():
    trace = solver_trace(lambda t, y: 0.1 * y, H0, SolverConfig("dopri5", rtol=1e-3, atol=1e-4))
    assert not trace.rejected
    reading = trace_reading(trace)
    assert reading.startswith(f"{len(trace.accepted)} step") and "first guess" in reading


def test_each_level_is_read_from_its_traces_rejections():
    """A sweep over a field's strength: a gentle field takes its steps by the step rules alone, a wild one
    has steps rejected, and the reading names which binds at which level."""
    traces = [
        solver_trace(lambda t, y, k=k: k * y * torch.sin(40 * t), H0, SolverConfig("dopri5", rtol=1e-4, atol=1e-5))
        for k in (0.0, 0.01, 5.0, 6.0)
    ]
    causes = level_causes(traces)
    assert [c.nfe for c in causes] == sorted({t.nfe for t in traces})
    assert sum(c.n_u for c in causes) == 4
    for c in causes:
        at = [t for t in traces if t.nfe == c.nfe]
        assert c.n_rejecting == sum(bool(t.rejected) for t in at)
        assert c.largest_accepted_ratio == max(s.error_ratio for t in at for s in t.accepted) <= 1
        if c.error_binds:
            low, high = c.rejected_ratios
            assert 1 < low <= high == max(s.error_ratio for t in at for s in t.rejected)
    assert not causes[0].error_binds and causes[-1].error_binds  # gentle: lowest level; wild: highest
    reading = levels_reading(causes, 4)
    assert f"{causes[0].nfe} NFE on " in reading and "no step rejected" in reading and "the error binds" in reading


def test_turn_rate_is_the_orthogonal_change_over_the_speed():
    f = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    change = torch.tensor([[3.0, 4.0], [5.0, 0.0]])  # token 0 turns at 4 / 2, token 1 at 5 / 1
    assert turn_rate(f, change).tolist() == pytest.approx([2.0, 5.0])
    assert turn_rate(f, 7 * f).tolist() == pytest.approx([0.0, 0.0], abs=1e-7)  # speeding up is no turn


def test_change_along_the_path_is_the_time_and_state_derivative():
    a = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # a rotation: F turns at rate 1 along the circle

    def f(t, h):
        return h @ a.T + t * torch.tensor([0.0, 3.0])

    h = torch.tensor([[[1.0, 0.0]]])
    value, change = change_along_path(f, torch.tensor(0.0), h)
    assert value.flatten().tolist() == pytest.approx([0.0, 1.0])
    # Ḟ = A·F + ∂F/∂τ = A·(0, 1) + (0, 3) = (-1, 3)
    assert change.flatten().tolist() == pytest.approx([-1.0, 3.0])
    assert float(turn_rate(value[0], change[0])) == pytest.approx(1.0)


def test_field_geometry_along_the_path(small_hybrid, small_tokenizer):
    from steering.analysis.inputs import prompt_tensor

    g = field_geometry(small_hybrid, small_tokenizer, "The movie was", [-1.0, 1.0], n_tau=5, stretching=True)
    tokens = len(g.token_strings)
    assert g.speed.shape == g.curvature.shape == g.stretching.shape == (2, 5)
    assert g.curvature_token.shape == (2, 5, tokens) and g.tau.tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1])
    assert np.isfinite(g.stretching).all() and (g.curvature >= 0).all()
    # the speed at τ = 0 is the field's own first evaluation there
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    h0 = small_hybrid.encode(idx)
    with torch.no_grad():
        f0 = field_under_control(small_hybrid, h0, torch.tensor([[-1.0, 0.0]]))(torch.tensor(0.0), h0)
    assert g.speed[0, 0] == pytest.approx(float(f0[0].norm(dim=-1).mean()), rel=1e-5)
    # the turn rate agrees with the angle F turns through over a short stretch of the path
    tau = torch.tensor([0.5, 0.5 + 1e-3])
    states = small_hybrid.middle(h0, torch.tensor([[-1.0, 0.0]]), SolverConfig("dopri5", rtol=1e-9, atol=1e-10), tau)
    with torch.no_grad():
        f = field_under_control(small_hybrid, h0, torch.tensor([[-1.0, 0.0]]))
        a, b = f(tau[0], states.states[0])[0].double(), f(tau[1], states.states[1])[0].double()
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    angle = torch.arccos(cos.clamp(-1, 1)) / 1e-3
    assert float(angle.mean()) == pytest.approx(g.curvature[0, 2], rel=0.1, abs=1e-3)


def test_curvature_by_level_tells_a_real_difference_from_none():
    nfe = np.array([14] * 10 + [20] * 10 + [14] * 10)
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, 30)
    apart = curvature_by_level(nfe, np.where(nfe == 20, 1.0, 0.5) + noise, draws=500)
    assert [row["level"] for row in apart["levels"]] == [14, 20]
    assert apart["levels"][1]["curvature"] - apart["levels"][0]["curvature"] == pytest.approx(0.5, abs=0.02)
    assert apart["p_value"] < 0.01 and apart["p_value_cyclic"] <= 0.1
    same = curvature_by_level(nfe, 0.5 + noise, draws=500)
    assert same["p_value"] > 0.05
    assert curvature_by_level(np.full(5, 14), np.arange(5.0))["p_value"] is None
    with pytest.raises(ValueError, match="one NFE and one curvature"):
        curvature_by_level(nfe, noise[:5])
    assert math.isclose(apart["levels"][0]["n_u"] + apart["levels"][1]["n_u"], 30)


def test_the_neighbour_across_a_switch():
    nfe = np.array([20, 20, 14, 14, 14, 20])
    assert neighbour_across_switch(nfe, 0) == 2
    assert neighbour_across_switch(nfe, 3) == 1  # two away on both sides: the left one
    assert neighbour_across_switch(nfe, 4) == 5
    assert neighbour_across_switch(np.full(4, 14), 3) == 2  # no switch: the next u (the previous at the end)
    assert neighbour_across_switch(np.full(4, 14), 1) == 2
    assert neighbour_across_switch(np.array([14]), 0) is None
    with pytest.raises(ValueError, match="outside"):
        neighbour_across_switch(nfe, 6)
