import numpy as np
import pytest
import torch
from torchdiffeq import odeint

from steering.analysis.inputs import tau_values, u_grid_array
from steering.analysis.trajectories import compute_trajectory, infer_adaptive_steps, pooled
from steering.model.ode import SolverConfig, SolverStepLimitError

PROMPT = "The movie was great"


def count_calls(module):
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize(
    "solver",
    [
        SolverConfig("euler", steps=4),
        SolverConfig("rk4", steps=3),
        SolverConfig("dopri5", rtol=1e-6, atol=1e-7),
        SolverConfig("adaptive_heun", rtol=1e-5, atol=1e-6),
    ],
)
def test_reported_nfe_is_the_fields_call_count(small_hybrid, small_tokenizer, solver):
    calls = count_calls(small_hybrid.field)
    traj = compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [1.0, 0.0], solver, n_tau=33)
    assert traj.nfe == len(calls) == len(traj.eval_taus)
    assert traj.states.shape[:2] == (33, len(traj.token_strings))
    assert traj.tau[0] == 0.0 and traj.tau[-1] == 1.0
    expected = {"euler": 4, "rk4": 12}.get(solver.method)
    if expected is not None:
        assert traj.nfe == expected


def test_fixed_solver_steps_are_the_grid(small_hybrid, small_tokenizer):
    traj = compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [0.5, 0.0], SolverConfig("euler", steps=4))
    assert traj.accepted_taus == [0.0, 0.25, 0.5, 0.75] and traj.rejected_taus == []


class Stiffish(torch.nn.Module):
    """A field whose sharp bump forces the adaptive solvers to reject steps."""

    def __init__(self):
        super().__init__()
        self.times, self.accepted, self.rejected = [], [], []

    def forward(self, t, y):
        self.times.append(float(t))
        return -y + 40 * torch.exp(-(((t - 0.6) / 0.03) ** 2)) * torch.ones_like(y)

    def callback_accept_step(self, t0, y0, dt):
        self.accepted.append((float(t0), float(dt)))

    def callback_reject_step(self, t0, y0, dt):
        self.rejected.append((float(t0), float(dt)))


@pytest.mark.parametrize("method", ["dopri5", "bosh3", "adaptive_heun"])
def test_inferred_steps_match_torchdiffeqs_own_callbacks(method):
    field = Stiffish()
    odeint(field, torch.ones(3), torch.tensor([0.0, 1.0]), method=method, rtol=1e-6, atol=1e-8)
    log = infer_adaptive_steps(field.times, method)
    assert len(field.rejected) > 0, "the test field must provoke rejections"
    assert [t for t, _ in log.accepted] == pytest.approx([t for t, _ in field.accepted], abs=1e-6)
    assert [t for t, _ in log.rejected] == pytest.approx([t for t, _ in field.rejected], abs=1e-6)
    assert [s for _, s in log.accepted] == pytest.approx([s for _, s in field.accepted], rel=1e-4, abs=1e-6)


def test_pooled_is_the_mean_token_path(small_hybrid, small_tokenizer):
    traj = compute_trajectory(small_hybrid, small_tokenizer, PROMPT, 0.3, n_tau=5)
    assert np.allclose(pooled(traj), traj.states.mean(axis=1))
    assert traj.u.tolist() == pytest.approx([0.3, 0.0])
    assert np.abs(traj.states[-1] - traj.states[0]).max() > 1e-4  # the field moved the state


def test_discrete_model_gives_its_block_boundaries(small_discrete, small_tokenizer):
    traj = compute_trajectory(small_discrete, small_tokenizer, PROMPT, [0.0, 0.0])
    assert traj.nfe == small_discrete.config.n_mid and len(traj.tau) == small_discrete.config.n_mid + 1


def test_bad_inputs_are_clear_errors(small_hybrid, small_tokenizer):
    with pytest.raises(ValueError, match="unknown solver"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [0, 0], "rk45")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [0, 0], tau=[0.0, 0.5, 1.5])
    with pytest.raises(ValueError, match="increasing"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [0, 0], tau=[0.0, 0.7, 0.5])
    with pytest.raises(ValueError, match="n_tau"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [0, 0], n_tau=1)
    with pytest.raises(ValueError, match="control"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [9.0, 0])
    with pytest.raises(ValueError, match="rtol"):
        SolverConfig("dopri5", rtol=0.0)
    with pytest.raises(ValueError, match="empty"):
        u_grid_array([])
    with pytest.raises(ValueError, match="increasing"):
        u_grid_array([0.0, -1.0])
    with pytest.raises(ValueError):
        tau_values([-0.1])


def test_adaptive_solve_hits_the_step_cap_not_a_hang(small_hybrid, small_tokenizer):
    capped = SolverConfig("dopri5", rtol=1e-12, atol=1e-12, max_steps=2)
    with pytest.raises(SolverStepLimitError, match="max_steps=2"):
        compute_trajectory(small_hybrid, small_tokenizer, PROMPT, [2.0, 0.0], capped)


def test_a_drawn_path_is_the_flow_with_the_solvers_step_ends_on_it(small_depth_hybrid, small_tokenizer):
    """RK4 with 2 steps stands at τ = 0, 0.5, 1. torchdiffeq fills a finer grid between them by straight
    lines (a tent); the drawn path is a fine solve instead, and the stations are the solver's own states."""
    from steering.analysis.trajectories import compute_path

    solver = SolverConfig("rk4", steps=2)
    path = compute_path(small_depth_hybrid, small_tokenizer, "the film was", (1.0, 0.0), solver, n_tau=33)
    own = compute_trajectory(small_depth_hybrid, small_tokenizer, "the film was", (1.0, 0.0), solver, n_tau=33)
    reference_solver = SolverConfig("dopri5", rtol=1e-7, atol=1e-9)
    reference = compute_trajectory(small_depth_hybrid, small_tokenizer, "the film was", (1.0, 0.0), reference_solver)
    assert path.station_tau.tolist() == [0.0, 0.5, 1.0]
    assert np.allclose(path.stations, own.states[[0, 16, 32]], atol=1e-6)  # the solver's own states
    assert path.nfe == own.nfe == 8 and path.eval_taus == own.eval_taus  # the solver's own effort
    quarter = 8  # τ = 0.25, between two stations
    tent_miss = np.linalg.norm(own.states[quarter] - reference.states[quarter])
    line_miss = np.linalg.norm(path.states[quarter] - reference.states[quarter])
    assert line_miss < 0.1 * tent_miss  # the tent cuts the corner; the drawn line follows the flow
    # and so it does at every drawn point, the step ends of its own RK4 and the cubic pieces between them
    dense = compute_trajectory(
        small_depth_hybrid, small_tokenizer, "the film was", (1.0, 0.0), reference_solver, n_tau=33
    )
    worst = np.linalg.norm(path.states - dense.states, axis=-1).max()
    assert worst < 0.1 * np.linalg.norm(own.states - dense.states, axis=-1).max()
    assert "cubic dense output" in path.line_label


@pytest.mark.parametrize(
    "solver", [SolverConfig("euler", steps=4), SolverConfig("midpoint", steps=3), SolverConfig("rk4", steps=2)]
)
def test_the_slopes_at_the_step_ends_are_the_field_there(small_depth_hybrid, small_tokenizer, solver):
    """solve_with_slopes reads dH/dτ at each step's start off the solver's first stage; it must be the field
    evaluated at that state and depth (and at τ = 1, evaluated)."""
    from steering.analysis.inputs import control_vector, prompt_tensor
    from steering.analysis.trajectories import solve_with_slopes

    model = small_depth_hybrid
    idx, _ = prompt_tensor(model, small_tokenizer, "the film was")
    u = control_vector([1.5, -0.5], "sentiment")
    with torch.no_grad():
        h0 = model.encode(idx)
        solve, slopes = solve_with_slopes(model, h0, u, solver)
        field = model.field.bind(model.control_or_zero(u, 1, h0.device), h0)
        taus = torch.linspace(0, 1, solver.steps + 1)
        explicit = torch.stack([field(t, h) for t, h in zip(taus, solve.states)])
    assert solve.nfe == {"euler": 1, "midpoint": 2, "rk4": 4}[solver.method] * solver.steps
    assert torch.allclose(slopes, explicit, atol=1e-6)
    assert not torch.allclose(slopes[0], slopes[-1])  # a depth-varying field: the slope changes along the path


def test_the_solvers_own_line_passes_through_its_step_ends_without_a_kink(small_depth_hybrid, small_tokenizer):
    """line="solver" (the Steer map's path) is the cubic through RK4-2's step ends: on them exactly, smooth at
    τ = 0.5 where the tent kinks, and nearer the flow than the tent between them."""
    from steering.analysis.trajectories import compute_path

    solver = SolverConfig("rk4", steps=2)
    args = (small_depth_hybrid, small_tokenizer, "the film was", (1.0, 0.0), solver)
    path = compute_path(*args, n_tau=33, line="solver")
    own = compute_trajectory(*args, n_tau=33)
    reference = compute_path(*args, n_tau=33)
    assert np.allclose(path.states[[0, 16, 32]], path.stations, atol=1e-5)
    assert np.allclose(path.stations, reference.stations) and path.nfe == reference.nfe == 8
    mean = path.states.mean(axis=1)
    tent = own.states.mean(axis=1)
    kink = lambda p: np.linalg.norm((p[17] - p[16]) - (p[16] - p[15]))  # noqa: E731  second difference at τ = 0.5
    assert kink(mean) < 0.25 * kink(tent)  # 0.17x here: the cubics meet with one slope (a C1 join, not C2)
    quarter = 8
    assert np.linalg.norm(path.states[quarter] - reference.states[quarter]) < np.linalg.norm(
        own.states[quarter] - reference.states[quarter]
    )
    assert "step ends" in path.line_label and "reference" in reference.line_label
    with pytest.raises(ValueError, match="line"):
        compute_path(*args, line="tent")


def test_an_adaptive_solvers_stations_are_its_accepted_step_ends(small_depth_hybrid, small_tokenizer):
    from steering.analysis.trajectories import compute_path

    solver = SolverConfig("dopri5", rtol=1e-3, atol=1e-4)
    path = compute_path(small_depth_hybrid, small_tokenizer, "the film was", (-1.0, 0.0), solver)
    own = compute_trajectory(small_depth_hybrid, small_tokenizer, "the film was", (-1.0, 0.0), solver)
    ends = [t + h for t, h in zip(own.accepted_taus, own.accepted_sizes)]
    assert np.allclose(path.station_tau, [0.0] + ends, atol=1e-6)
    assert path.station_tau[-1] == 1.0 and len(path.stations) == len(ends) + 1
    assert np.allclose(path.states, own.states)  # its dense output is the line
    assert np.allclose(path.stations[-1], own.states[-1], atol=1e-5)
