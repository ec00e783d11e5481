import pytest
import torch

from steering.model.ode import (
    ControlledVectorField,
    SolverConfig,
    SolverStepLimitError,
    path_roughness,
    solve_block,
    validate_control,
    validate_tau_grid,
)


def make_field(seed=0, alpha=0.5, out_std=0.1):
    torch.manual_seed(seed)
    field = ControlledVectorField(d_model=16, control_dim=2, control_embed_dim=4, hidden=32, alpha_init=alpha)
    field.reset_parameters()
    torch.nn.init.normal_(field.fc_out.weight, std=out_std)
    return field


def test_alpha_starts_at_its_initial_value_and_output_layer_near_zero():
    field = ControlledVectorField(16, 2, 4, 32, alpha_init=0.1)
    field.reset_parameters()
    assert field.alpha.item() == pytest.approx(0.1)
    assert field.fc_out.weight.abs().max() < 0.01
    h = torch.randn(2, 5, 16)
    assert field(torch.tensor(0.0), h, torch.zeros(2, 2)).abs().max() < 0.01


def test_nfe_equals_the_fields_call_count():
    field = make_field()
    calls = []
    field.register_forward_hook(lambda *a: calls.append(1))
    h0 = torch.randn(1, 3, 16)
    for solver in (SolverConfig("euler", steps=4), SolverConfig("rk4", steps=3), SolverConfig("dopri5", rtol=1e-5)):
        calls.clear()
        result = solve_block(field, h0, torch.tensor([[1.0, 0.0]]), solver)
        assert result.nfe == len(calls) == len(result.eval_taus)
    assert solve_block(field, h0, torch.tensor([[1.0, 0.0]]), SolverConfig("euler", steps=4)).nfe == 4
    assert solve_block(field, h0, torch.tensor([[1.0, 0.0]]), SolverConfig("rk4", steps=3)).nfe == 12


def test_fixed_and_adaptive_solvers_agree_on_a_smooth_field():
    field = make_field()
    h0 = torch.randn(2, 4, 16)
    u = torch.tensor([[1.0, -1.0]])
    reference = solve_block(field, h0, u, SolverConfig("dopri5", rtol=1e-8, atol=1e-8)).final
    for solver in (
        SolverConfig("rk4", steps=16),
        SolverConfig("bosh3", rtol=1e-6, atol=1e-6),
        SolverConfig("adaptive_heun", rtol=1e-6, atol=1e-6),
        SolverConfig("midpoint", steps=64),
    ):
        out = solve_block(field, h0, u, solver).final
        assert (out - reference).norm() / reference.norm() < 1e-4, solver
    moved = (reference - h0).norm() / h0.norm()
    assert moved > 0.01, "the field must actually move the state for this test to mean anything"


def test_states_on_a_requested_grid_start_at_h0_and_end_at_the_final_state():
    field = make_field()
    h0 = torch.randn(1, 3, 16)
    u = torch.tensor([[0.5, 0.0]])
    result = solve_block(field, h0, u, SolverConfig("rk4", steps=8), tau=torch.linspace(0, 1, 33))
    assert result.states.shape == (33, 1, 3, 16)
    assert torch.allclose(result.states[0], h0)
    end_only = solve_block(field, h0, u, SolverConfig("rk4", steps=8)).final
    assert torch.allclose(result.final, end_only, atol=1e-6)
    partial = solve_block(field, h0, u, SolverConfig("rk4", steps=8), tau=[0.5, 1.0])
    assert partial.states.shape[0] == 2
    assert torch.allclose(partial.states[0], result.states[16], atol=1e-6)


def test_adaptive_step_cap_raises_a_clear_error():
    field = make_field(alpha=5.0, out_std=1.0)
    h0 = torch.randn(1, 3, 16)
    with pytest.raises(SolverStepLimitError, match="max_steps=3"):
        solve_block(field, h0, torch.tensor([[2.0, 2.0]]), SolverConfig("dopri5", rtol=1e-10, atol=1e-10, max_steps=3))
    assert solve_block(field, h0, torch.tensor([[0.0, 0.0]]), SolverConfig("euler")).nfe == 4  # still usable


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(method="rk45"), "unknown solver"),
        (dict(method="dopri5", rtol=0.0), "rtol"),
        (dict(method="dopri5", atol=float("nan")), "atol"),
        (dict(method="dopri5", rtol=5.0), "rtol"),
        (dict(method="euler", steps=0), "steps"),
    ],
)
def test_bad_solver_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SolverConfig(**kwargs)


@pytest.mark.parametrize(
    "u, message",
    [
        ([float("nan"), 0.0], "finite"),
        ([4.0, 0.0], r"\[-3, 3\]"),
        ([0.0, -3.5], r"\[-3, 3\]"),
        ([1.0], "2 values"),
    ],
)
def test_bad_controls_are_refused(u, message):
    with pytest.raises(ValueError, match=message):
        validate_control(u)


@pytest.mark.parametrize("grid", [[0.0], [0.0, 1.2], [0.5, 0.2, 1.0], [-0.1, 1.0]])
def test_bad_tau_grids_are_refused(grid):
    with pytest.raises(ValueError):
        validate_tau_grid(grid)


def test_path_roughness_is_zero_for_a_constant_field_and_grows_with_change():
    h0 = torch.ones(1, 2, 4)
    constant = [torch.full((1, 2, 4), 0.3)] * 4
    assert path_roughness(constant, h0).item() == 0.0
    changing = [torch.full((1, 2, 4), 0.1 * k) for k in range(4)]
    assert path_roughness(changing, h0).item() == pytest.approx(0.01, rel=1e-5)


def test_path_roughness_relative_to_the_field_is_blind_to_its_size():
    h0 = torch.ones(1, 2, 4)
    path = [torch.full((1, 2, 4), 1.0 + 0.1 * k) for k in range(4)]
    scaled = [10 * out for out in path]
    # relative to the state, a ten times larger field is a hundred times rougher
    assert path_roughness(scaled, h0).item() == pytest.approx(100 * path_roughness(path, h0).item(), rel=1e-5)
    assert path_roughness(scaled, h0, "field").item() == pytest.approx(
        path_roughness(path, h0, "field").item(), rel=1e-5
    )
    # mean squared step 0.04 per token over mean |F|² = 4 * mean((1 + 0.1k)²)
    expected = 0.04 / (4 * sum((1 + 0.1 * k) ** 2 for k in range(4)) / 4)
    assert path_roughness(path, h0, "field").item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError):
        path_roughness(path, h0, "tokens")


def test_adjoint_and_direct_backprop_give_the_same_gradients():
    field = make_field()
    h0 = torch.randn(1, 3, 16)
    u = torch.tensor([[1.0, 0.0]], requires_grad=True)
    grads = []
    for adjoint in (False, True):
        field.zero_grad()
        u.grad = None
        out = solve_block(field, h0, u, SolverConfig("rk4", steps=4, adjoint=adjoint)).final
        out.pow(2).sum().backward()
        grads.append((field.fc_out.weight.grad.clone(), u.grad.clone()))
    assert torch.allclose(grads[0][0], grads[1][0], rtol=1e-3, atol=1e-6)
    assert torch.allclose(grads[0][1], grads[1][1], rtol=1e-3, atol=1e-6)
    assert grads[0][1].abs().sum() > 0


def test_euler_fast_path_matches_torchdiffeq_euler():
    from torchdiffeq import odeint

    from steering.model.ode import _FieldUnderControl

    field = make_field()
    h0 = torch.randn(2, 5, 16)
    u = torch.tensor([[0.8, -0.4], [-1.0, 1.0]])
    for steps in (1, 4, 7):
        fast = solve_block(field, h0, u, SolverConfig("euler", steps=steps))
        assert fast.nfe == steps and fast.eval_taus == pytest.approx([k / steps for k in range(steps)])
        reference = odeint(
            _FieldUnderControl(field, u),
            h0,
            torch.tensor([0.0, 1.0]),
            method="euler",
            options={"step_size": 1.0 / steps},
        )
        assert torch.allclose(fast.states, reference, atol=1e-6)
    # a finer τ grid still goes through torchdiffeq and agrees at the end
    grid = solve_block(field, h0, u, SolverConfig("euler", steps=4), tau=torch.linspace(0, 1, 9))
    assert torch.allclose(grid.final, solve_block(field, h0, u, SolverConfig("euler", steps=4)).final, atol=1e-6)


@pytest.mark.parametrize("mix_heads", [0, 2])
def test_a_token_sees_earlier_tokens_only_when_the_field_mixes_them(mix_heads):
    torch.manual_seed(0)
    field = ControlledVectorField(16, 2, 4, 32, alpha_init=0.5, mix_heads=mix_heads)
    field.reset_parameters()
    torch.nn.init.normal_(field.fc_out.weight, std=0.1)
    if mix_heads:
        torch.nn.init.normal_(field.mix.proj.weight, std=0.1)
    h = torch.randn(1, 6, 16)
    changed = h.clone()
    changed[0, 2] += torch.randn(16)  # disturb token 2 only
    base = solve_block(field, h, torch.zeros(1, 2)).final
    moved = solve_block(field, changed, torch.zeros(1, 2)).final
    diff = (moved - base).abs().amax(dim=-1)[0]
    assert torch.all(diff[:2] == 0)  # causal: earlier tokens never see a later one
    if mix_heads:
        assert torch.all(diff[3:] > 1e-4)  # later tokens attend to it
    else:
        assert torch.all(diff[3:] == 0)  # a per-token field keeps tokens apart


def test_a_mixing_field_starts_near_the_identity():
    field = ControlledVectorField(16, 2, 4, 32, alpha_init=1.0, mix_heads=2)
    field.reset_parameters()
    h = torch.randn(2, 5, 16)
    assert field(torch.tensor(0.0), h, torch.zeros(2, 2)).abs().max() < 0.05


def _field_that_never_reads_its_writes(d=16, hidden=32, heads=2, norm_mode="layer"):
    """Reads see features [0, d/2) only; writes land in [d/2, d) with zero mean over features."""
    torch.manual_seed(3)
    field = ControlledVectorField(d, 2, 4, hidden, alpha_init=1.0, mix_heads=heads, norm_mode=norm_mode)
    field.reset_parameters()
    half = d // 2
    with torch.no_grad():
        field.fc_in.weight[:, half:d] = 0
        field.mix.qkv.weight[:, half:] = 0
        for write in (field.fc_out.weight, field.mix.proj.weight):
            write.normal_(std=0.3)
            write[:half] = 0
            write[half:] -= write[half:].mean(0, keepdim=True)
    return field


def _random_field(d=16, hidden=32, heads=2):
    torch.manual_seed(3)
    field = ControlledVectorField(d, 2, 4, hidden, alpha_init=1.0, mix_heads=heads)
    field.reset_parameters()
    with torch.no_grad():
        field.fc_out.weight.normal_(std=0.3)
        field.mix.proj.weight.normal_(std=0.3)
    return field


def test_read_write_overlap_is_about_one_for_random_weights_zero_when_disjoint_and_blind_to_size():
    random_field, disjoint = _random_field(), _field_that_never_reads_its_writes()
    assert 0.3 < random_field.read_write_overlap().item() < 3.0
    assert disjoint.read_write_overlap().item() < 1e-10
    before = random_field.read_write_overlap().item()
    with torch.no_grad():
        random_field.fc_out.weight.mul_(10.0)
        random_field.mix.proj.weight.mul_(0.1)
    assert random_field.read_write_overlap().item() == pytest.approx(before, rel=1e-4)


def test_a_field_blind_to_its_writes_keeps_four_euler_steps_close_to_the_exact_path():
    """At the same displacement, Euler-4's error against a fine RK4 solve is several times
    smaller when the field does not read what it writes; what is left comes from the norm's
    scale, which the writes still change.
    Both fields ignore τ, whose own share of the error the overlap does not measure."""
    h0, u = torch.randn(2, 5, 16), torch.tensor([[0.5, -0.5]])
    errors = {}
    for name, field in (("random", _random_field()), ("disjoint", _field_that_never_reads_its_writes())):
        with torch.no_grad():
            field.fc_in.weight[:, -1] = 0
            move = solve_block(field, h0, u, SolverConfig("euler", steps=4)).final - h0
            field.alpha.fill_(0.25 * h0.norm().item() / move.norm().item())  # move H by about a quarter of its size
            coarse = solve_block(field, h0, u, SolverConfig("euler", steps=4)).final
            fine = solve_block(field, h0, u, SolverConfig("rk4", steps=64)).final
        assert 0.15 < ((fine - h0).norm() / h0.norm()).item() < 0.4
        errors[name] = ((coarse - fine).norm() / fine.norm()).item()
    assert errors["disjoint"] < 0.5 * errors["random"], errors


def _euler4_error_at_a_quarter_displacement(field, h0, u):
    with torch.no_grad():
        field.fc_in.weight[:, -1] = 0
        move = solve_block(field, h0, u, SolverConfig("euler", steps=4)).final - h0
        field.alpha.fill_(0.25 * h0.norm().item() / move.norm().item())
        coarse = solve_block(field, h0, u, SolverConfig("euler", steps=4)).final
        fine = solve_block(field, h0, u, SolverConfig("rk4", steps=64)).final
    assert 0.15 < ((fine - h0).norm() / h0.norm()).item() < 0.4
    return ((coarse - fine).norm() / fine.norm()).item()


def test_an_entry_normalised_field_blind_to_its_writes_is_exact_under_euler():
    """With the norm's statistics fixed at H(0), a field that cannot see its writes is constant
    along its path, so Euler is exact at any displacement; the same weights under the usual
    LayerNorm still err, through the norm's scale."""
    torch.manual_seed(5)
    h0, u = torch.randn(2, 5, 16) + 0.5, torch.tensor([[0.5, -0.5]])
    entry = _euler4_error_at_a_quarter_displacement(_field_that_never_reads_its_writes(norm_mode="entry"), h0, u)
    layer = _euler4_error_at_a_quarter_displacement(_field_that_never_reads_its_writes(norm_mode="layer"), h0, u)
    assert entry < 1e-5 and layer > 100 * entry, (entry, layer)


def test_entry_normalisation_reads_the_shared_shift_that_layer_normalisation_removes():
    field = _field_that_never_reads_its_writes(norm_mode="entry")
    assert field.read_write_overlap().item() < 1e-10
    with torch.no_grad():
        field.fc_in.weight[:, :8].normal_()  # the reads see [0, 8), whose mean the writes now shift
        field.fc_out.weight[:8] += 0.3
    entry_overlap = field.read_write_overlap().item()
    field.norm_mode = "layer"
    assert entry_overlap > 0.05 and field.read_write_overlap().item() < 0.5 * entry_overlap


def test_an_entry_normalised_field_needs_its_entry_state_and_its_adjoint_gradient_is_exact():
    torch.manual_seed(0)
    field = ControlledVectorField(16, 2, 4, 32, alpha_init=1.0, mix_heads=2, norm_mode="entry")
    field.reset_parameters()
    with torch.no_grad():
        field.fc_out.weight.normal_(std=0.3)
    h0 = torch.randn(2, 5, 16, requires_grad=True)
    u = torch.randn(2, 2)
    with pytest.raises(ValueError, match="entry statistics"):
        field(torch.tensor(0.0), h0, u)
    grads = []
    for adjoint in (False, True):
        final = solve_block(field, h0, u, SolverConfig("dopri5", rtol=1e-7, atol=1e-7, adjoint=adjoint)).final
        grads.append(torch.autograd.grad(final.pow(2).sum(), h0)[0])
    assert torch.allclose(grads[0], grads[1], atol=1e-4), (grads[0] - grads[1]).abs().max()
