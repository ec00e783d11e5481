"""The continuous-depth block: a controlled vector field and the solver calls around it.

dH/dτ = α · F_θ(norm(H), e(u), τ),  τ ∈ [0, 1]

The control u reaches the network only here, at every depth. This module does not
know about the transformer around it: it takes a state tensor H of shape
[batch, tokens, d_model] and a control of shape [batch, control_dim].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchdiffeq import odeint, odeint_adjoint

from .attention import CausalSelfAttention

FIXED_SOLVERS = ("euler", "midpoint", "rk4")
ADAPTIVE_SOLVERS = ("dopri5", "bosh3", "adaptive_heun")
SOLVERS = FIXED_SOLVERS + ADAPTIVE_SOLVERS

FIELD_NORMS = ("layer", "entry")
CONTROL_AXES = ("sentiment", "style")
CONTROL_LIMIT = 3.0


def adaptive_options(max_steps: int, tau_end: float = 1.0, past_end: bool = False) -> dict:
    """torchdiffeq's options for an adaptive solve that ends at tau_end: the step cap, and a last step that
    lands on tau_end. Left alone, torchdiffeq lets the last step run past the end and interpolates back, so
    the field is evaluated beyond τ = 1: for a depth-varying field that is its weights extrapolated past the
    depth they were trained on, and the error out there, not the flow's, set dopri5's step count
    (docs/journal.md, "dopri5 stepped past τ = 1"). past_end=True keeps torchdiffeq's default (the regimes
    map's comparison, `analyze regimes-map --past-end`)."""
    if past_end:
        return {"max_num_steps": max_steps}
    return {"max_num_steps": max_steps, "step_t": torch.tensor([float(tau_end)], dtype=torch.float64)}


class SolverStepLimitError(RuntimeError):
    """An adaptive solve needed more steps than its cap."""


@dataclass(frozen=True)
class SolverConfig:
    """How to integrate the block. Fixed solvers use `steps`; adaptive ones rtol/atol."""

    method: str = "euler"
    steps: int = 4
    rtol: float = 1e-3
    atol: float = 1e-4
    adjoint: bool = False
    max_steps: int = 2000

    def __post_init__(self):
        if self.method not in SOLVERS:
            raise ValueError(f"unknown solver {self.method!r}; choose one of {', '.join(SOLVERS)}")
        if self.is_fixed:
            if not isinstance(self.steps, int) or not 1 <= self.steps <= 4096:
                raise ValueError(f"steps must be an integer in [1, 4096], got {self.steps!r}")
        else:
            for name in ("rtol", "atol"):
                value = getattr(self, name)
                if not (isinstance(value, (int, float)) and math.isfinite(value) and 1e-12 <= value <= 1.0):
                    raise ValueError(f"{name} must be a number in [1e-12, 1], got {value!r}")
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_steps!r}")

    @property
    def is_fixed(self) -> bool:
        return self.method in FIXED_SOLVERS

    def label(self) -> str:
        if self.is_fixed:
            return f"{self.method} ({self.steps} steps)"
        return f"{self.method} (rtol {self.rtol:g}, atol {self.atol:g})"

    def to_dict(self) -> dict:
        return asdict(self)


TRAINING_SOLVER = SolverConfig("euler", steps=4)


def validate_control(u, control_dim: int = len(CONTROL_AXES)) -> torch.Tensor:
    """Return u as a float tensor [batch, control_dim]; refuse non-finite or out-of-range values."""
    u = torch.as_tensor(u, dtype=torch.float32)
    if u.dim() == 1:
        u = u.unsqueeze(0)
    if u.dim() != 2 or u.shape[-1] != control_dim:
        raise ValueError(
            f"control must have {control_dim} values ({', '.join(CONTROL_AXES)}), got shape {tuple(u.shape)}"
        )
    if not torch.isfinite(u).all():
        raise ValueError("control values must be finite numbers")
    if u.abs().max() > CONTROL_LIMIT:
        raise ValueError(f"control values must lie in [-{CONTROL_LIMIT:g}, {CONTROL_LIMIT:g}], got {u.tolist()}")
    return u


def validate_tau_grid(tau: Sequence[float] | torch.Tensor) -> torch.Tensor:
    tau = torch.as_tensor(tau, dtype=torch.float32).flatten()
    if tau.numel() < 2:
        raise ValueError("a τ grid needs at least two points")
    if not torch.isfinite(tau).all() or tau.min() < 0 or tau.max() > 1:
        raise ValueError("τ grid values must lie in [0, 1]")
    if not (tau[1:] > tau[:-1]).all():
        raise ValueError("τ grid must be strictly increasing")
    return tau


class ControlledVectorField(nn.Module):
    """α · F_θ(norm(H), e(u), τ): an MLP with a softplus on each token, plus (mix_heads > 0)
    causal self-attention over the tokens of norm(H), the two summed as in a parallel
    transformer block. Without attention the field acts on each token on its own.

    e(u) is a learned linear embedding of the low-dimensional control, so that a
    two-number control can still move many hidden units. The output layers start
    near zero, so the block starts as the identity map. After split_control_embedding,
    e(u) = W₊·max(u, 0) + W₋·min(u, 0): still continuous and zero at u = 0, but each
    sign of each axis moves the field along its own direction, so steering one way need
    not move the other side by the same amount (a linear e(u) ties e(-u) to -e(u)).

    After add_beyond_steering, |u| beyond 1 adds its own share to the first layer's
    pre-activation, B₊·max(u - 1, 0) + B₋·min(u + 1, 0), zero for |u| ≤ 1: u = ±1 keeps
    meaning "a review with this label" (the data), while steering harder than the data
    (|u| = 2) has directions of its own (docs/model-card.md, "What u means").

    Cached decoding (kv_cache, a dict from evaluation index to that evaluation's keys and
    values) is exact for fixed-step solvers: they evaluate the field at the same depths in
    the same order for every token, and a token's path does not depend on later tokens.

    norm_mode "layer" normalises the current state, LayerNorm(H(τ)). "entry" normalises with
    each token's mean and scale at the block's entry, (H(τ) - μ(H(0))) / σ(H(0)) · g + b: a
    fixed affine change of coordinates along the path. Under "layer" a write the field does
    not read still bends its path, since it changes σ(H) and so the scale of what the field
    reads (docs/journal.md, "Why the field curves" (OV1, OV10)); under "entry" the field changes along its path only
    through what it reads of its own writes, which `read_write_overlap` measures.
    """

    def __init__(
        self,
        d_model: int,
        control_dim: int,
        control_embed_dim: int,
        hidden: int,
        alpha_init: float,
        mix_heads: int = 0,
        norm_mode: str = "layer",
    ):
        super().__init__()
        if norm_mode not in FIELD_NORMS:
            raise ValueError(f"norm_mode must be one of {', '.join(FIELD_NORMS)}, got {norm_mode!r}")
        self.norm_mode = norm_mode
        self.mix = CausalSelfAttention(d_model, mix_heads) if mix_heads else None
        self.kv_cache: dict[int, dict] | None = None
        self.norm = nn.LayerNorm(d_model)
        self.control_embed = nn.Linear(control_dim, control_embed_dim, bias=False)
        self.control_embed_negative: nn.Linear | None = None  # W₋, once split
        self.beyond_positive: nn.Linear | None = None  # B₊ and B₋, once added
        self.beyond_negative: nn.Linear | None = None
        self.fc_in = nn.Linear(d_model + control_embed_dim + 1, hidden)
        self.fc_out = nn.Linear(hidden, d_model)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.nfe = 0
        self.eval_taus: list[float] = []
        self.recorded_outputs: list[torch.Tensor] | None = None

    @property
    def mixes_tokens(self) -> bool:
        """Whether the field attends over the tokens (cached decoding then keeps keys and values per evaluation)."""
        return self.mix is not None

    def reset_parameters(self):
        nn.init.normal_(self.control_embed.weight, std=1.0)
        nn.init.normal_(self.fc_in.weight, std=1.0 / math.sqrt(self.fc_in.in_features))
        nn.init.zeros_(self.fc_in.bias)
        nn.init.normal_(self.fc_out.weight, std=1e-3)
        nn.init.zeros_(self.fc_out.bias)
        if self.mix is not None:
            nn.init.normal_(self.mix.qkv.weight, std=0.02)
            nn.init.zeros_(self.mix.qkv.bias)
            nn.init.normal_(self.mix.proj.weight, std=1e-3)
            nn.init.zeros_(self.mix.proj.bias)

    def entry_statistics(self, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's mean and scale (as LayerNorm computes them) at the block's entry."""
        mean = h0.mean(-1, keepdim=True)
        # two passes, not Tensor.var: its one-pass kernel took 2.0 ms of a 150 ms forward at [8, 128, 384]
        # on this CPU, these 0.2 ms (the same value to 3e-7)
        centered = h0 - mean
        scale = torch.sqrt((centered * centered).mean(-1, keepdim=True) + self.norm.eps)
        return mean, scale

    def normalize(self, h: torch.Tensor, entry_stats: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        if self.norm_mode == "layer":
            return self.norm(h)
        if entry_stats is None:
            raise ValueError("an entry-normalised field needs its path's entry statistics (bind it to H(0))")
        mean, scale = entry_stats
        if not torch.is_grad_enabled():  # the same arithmetic in place: fewer buffers when decoding or measuring
            return torch.sub(h, mean).div_(scale).mul_(self.norm.weight).add_(self.norm.bias)
        return (h - mean) / scale * self.norm.weight + self.norm.bias

    def bind(self, u: torch.Tensor, h0: torch.Tensor, precompute: bool = True) -> _FieldUnderControl:
        """f(τ, H) for the path that starts at h0 under control u, as torchdiffeq wants it."""
        return _FieldUnderControl(self, u, self.entry_statistics(h0) if self.norm_mode == "entry" else None, precompute)

    def split_control_embedding(self):
        """W₋ := a copy of W, so e(u) is unchanged until training moves the two signs apart."""
        if self.control_embed_negative is None:
            self.control_embed_negative = nn.Linear(
                self.control_embed.in_features, self.control_embed.out_features, bias=False
            ).to(self.control_embed.weight)
            with torch.no_grad():
                self.control_embed_negative.weight.copy_(self.control_embed.weight)

    def add_beyond_steering(self):
        """B₊ = B₋ = 0: the field is unchanged until training gives |u| > 1 directions of its own."""
        if self.beyond_positive is None:
            control_dim, hidden = self.control_embed.in_features, self.fc_in.out_features
            self.beyond_positive = nn.Linear(control_dim, hidden, bias=False).to(self.fc_in.weight)
            self.beyond_negative = nn.Linear(control_dim, hidden, bias=False).to(self.fc_in.weight)
            nn.init.zeros_(self.beyond_positive.weight)
            nn.init.zeros_(self.beyond_negative.weight)

    def embed_control(self, u: torch.Tensor) -> torch.Tensor:
        if self.control_embed_negative is None:
            return self.control_embed(u)
        return self.control_embed(u.clamp_min(0)) + self.control_embed_negative(u.clamp_max(0))

    def control_features(self, u: torch.Tensor) -> torch.Tensor:
        """The control's share of the first layer's pre-activation, [batch, 1, hidden]: fixed along τ."""
        d, e = self.norm.normalized_shape[0], self.control_embed.out_features
        w_u = self.fc_in.weight[:, d : d + e]
        features = F.linear(self.embed_control(u), w_u, self.fc_in.bias)
        if self.beyond_positive is not None:
            features = (
                features + self.beyond_positive((u - 1).clamp_min(0)) + self.beyond_negative((u + 1).clamp_max(0))
            )
        return features.unsqueeze(1)

    def forward(
        self,
        tau: torch.Tensor,
        h: torch.Tensor,
        u: torch.Tensor | None = None,
        control_features: torch.Tensor | None = None,
        entry_stats: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """α·F at depth τ for states h [batch, tokens, d] under control u [batch, c].

        fc_in acts on concat(norm(h), e(u), τ); it is applied as the sum of its three column
        blocks so that the control's share can be computed once per solve (control_features).
        """
        self.nfe += 1
        self.eval_taus.append(float(tau.detach()) if torch.is_tensor(tau) else float(tau))
        if control_features is None:
            if u is None:
                raise ValueError("the field needs a control u (or its precomputed control_features)")
            control_features = self.control_features(u.to(h.dtype))
        d = h.shape[-1]
        w = self.fc_in.weight
        normed = self.normalize(h, entry_stats)
        # the control's and τ's shares, [batch, 1, hidden], are summed before they meet the tokens' share
        shift = control_features + torch.as_tensor(tau, dtype=h.dtype) * w[:, -1]
        # without autograd (and autocast, which would change the result dtypes) the same sums and
        # products run in place: bit for bit the same values, fewer buffers
        grad = torch.is_grad_enabled() or torch.is_autocast_enabled(h.device.type)
        pre = F.linear(normed, w[:, :d])
        pre = pre + shift if grad else pre.add_(shift)
        out = self.fc_out(F.softplus(pre))
        if self.mix is not None:
            cache = None if self.kv_cache is None else self.kv_cache.setdefault(self.nfe - 1, {})
            mixed = self.mix(normed, cache)
            out = out + mixed if grad else out.add_(mixed)
        out = self.alpha * out if grad else out.mul_(self.alpha)
        if self.recorded_outputs is not None:
            self.recorded_outputs.append(out)
        return out

    def read_write_overlap(self) -> torch.Tensor:
        """How much the field reads what it writes: d·||R·W||²/(||R||²·||W||²), averaged over every
        (read, write) pair of its layers; about 1 for random weights, 0 when the writes fall where
        the reads are blind.

        Reads are the rows of the first MLP layer's state block and of the attention's query/key/
        value map, scaled by the norm's gain; writes are the columns of the MLP's and attention's
        output layers, centred over features under "layer" (that norm removes a shared shift;
        the "entry" norm subtracts a fixed mean, so it sees the shift). Forward Euler
        errs by how much α·F changes along its own path, and F changes along the path because
        its reads see its writes. With no overlap, what is left of that change comes from the
        norm's scale, which the writes still move under "layer" (docs/journal.md: the OV1 and OV10 runs) and not
        under "entry". The ratio is blind to
        the weights' size, so lowering it cannot shrink the update.
        """
        d = self.norm.normalized_shape[0]
        reads = [self.fc_in.weight[:, :d]] + ([self.mix.qkv.weight] if self.mix is not None else [])
        writes = [self.fc_out.weight] + ([self.mix.proj.weight] if self.mix is not None else [])
        reads = [read * self.norm.weight for read in reads]
        if self.norm_mode == "layer":
            writes = [write - write.mean(0, keepdim=True) for write in writes]
        overlaps = [
            (read @ write).pow(2).sum() / (read.pow(2).sum() * write.pow(2).sum()).clamp_min(1e-20)
            for read in reads
            for write in writes
        ]
        return d * torch.stack(overlaps).mean()


class _FieldUnderControl(nn.Module):
    """The field with u bound, as torchdiffeq wants f(τ, H).

    With direct backprop the control's features are computed once per solve. The adjoint
    pass differentiates f(τ, H) alone, so there they are recomputed inside each call.
    """

    def __init__(self, field: ControlledVectorField, u: torch.Tensor, entry_stats=None, precompute: bool = True):
        super().__init__()
        self.field = field
        self.u = u
        self.entry_stats = entry_stats
        self.features = field.control_features(u) if precompute else None

    def forward(self, tau, h):
        return self.field(tau, h, self.u, self.features, self.entry_stats)


@dataclass
class BlockSolve:
    states: torch.Tensor  # [len(tau), batch, tokens, d_model]
    tau: torch.Tensor  # the grid the states are given on
    nfe: int  # vector-field evaluations in this solve (forward only)
    eval_taus: list[float]  # τ at which the field was evaluated, in call order
    field_outputs: list[torch.Tensor] | None = None  # α·F at each evaluation, when recorded

    @property
    def final(self) -> torch.Tensor:
        return self.states[-1]


def solve_block(
    field: ControlledVectorField,
    h0: torch.Tensor,
    u: torch.Tensor,
    solver: SolverConfig = TRAINING_SOLVER,
    tau: Sequence[float] | torch.Tensor | None = None,
    record_outputs: bool = False,
    kv_cache: dict | None = None,
) -> BlockSolve:
    """Integrate the field from τ=0 with state h0 under control u; states on the τ grid.

    kv_cache (a token-mixing field's keys and values per evaluation, for cached decoding:
    h0 then holds only the tokens after the cached ones) needs a fixed-step solver.
    """
    if kv_cache is not None and not solver.is_fixed:
        raise ValueError(
            f"cached decoding needs a fixed-step solver; {solver.method} picks its steps "
            "from all the tokens it integrates, so integrate the whole sequence"
        )
    tau = validate_tau_grid([0.0, 1.0] if tau is None else tau).to(h0.device)
    if float(tau[0]) != 0.0:
        # the block always starts at τ = 0; a grid that starts later is read off a full solve
        tau_full = torch.cat([tau.new_zeros(1), tau])
    else:
        tau_full = tau
    u = u.to(h0.dtype)
    if u.dim() == 1:
        u = u.unsqueeze(0)
    if u.shape[0] == 1 and h0.shape[0] > 1:
        u = u.expand(h0.shape[0], -1)
    field.nfe = 0
    field.eval_taus = []
    field.recorded_outputs = [] if record_outputs else None
    field.kv_cache = kv_cache
    try:
        return _solve(field, h0, u, solver, tau, tau_full)
    finally:
        field.kv_cache = None


def _solve(field, h0, u, solver, tau, tau_full) -> BlockSolve:
    if solver.method == "euler" and not solver.adjoint and tau_full.numel() == 2 and float(tau_full[-1]) == 1.0:
        return _euler_endpoints(field, h0, u, solver.steps, tau)
    if solver.is_fixed:
        options = {"step_size": 1.0 / solver.steps}
    else:
        options = adaptive_options(solver.max_steps, float(tau_full[-1]))
    kwargs = dict(method=solver.method, options=options)
    if not solver.is_fixed:
        kwargs.update(rtol=solver.rtol, atol=solver.atol)
    try:
        if solver.adjoint:
            params = tuple(p for p in field.parameters() if p.requires_grad)
            if u.requires_grad:
                params = params + (u,)
            bound = field.bind(u, h0, precompute=False)
            # the entry statistics enter f as constants; listing them gives h0 their share of the gradient
            params = params + tuple(t for t in (bound.entry_stats or ()) if t.requires_grad)
            states = odeint_adjoint(bound, h0, tau_full, adjoint_params=params, **kwargs)
        else:
            states = odeint(field.bind(u, h0), h0, tau_full, **kwargs)
    except AssertionError as err:
        if "max_num_steps" in str(err):
            raise SolverStepLimitError(
                f"{solver.method} needed more than max_steps={solver.max_steps} steps at rtol={solver.rtol:g}, "
                f"atol={solver.atol:g}; loosen the tolerance or raise the step cap"
            ) from None
        raise
    if tau_full is not tau:
        states = states[1:]
    outputs = field.recorded_outputs
    field.recorded_outputs = None
    return BlockSolve(states=states, tau=tau, nfe=field.nfe, eval_taus=list(field.eval_taus), field_outputs=outputs)


def _euler_endpoints(
    field: ControlledVectorField, h0: torch.Tensor, u: torch.Tensor, steps: int, tau: torch.Tensor
) -> BlockSolve:
    """Forward Euler from τ=0 to 1, states at both ends: the same arithmetic as torchdiffeq's
    "euler" on the grid (0, 1), without its per-call bookkeeping, which dominates when one
    token is decoded at a time (generation with the KV cache, the app's slider)."""
    bound = field.bind(u, h0)
    dt = 1.0 / steps
    # a power-of-two step makes dt·f exact, so the fused multiply-add gives h + dt·f bit for bit, in one pass
    exact_fma = math.frexp(dt)[0] == 0.5
    h = h0
    for k in range(steps):
        f = bound(h0.new_tensor(k * dt), h)
        h = torch.add(h, f, alpha=dt) if exact_fma else h + dt * f
    outputs = field.recorded_outputs
    field.recorded_outputs = None
    return BlockSolve(
        states=torch.stack([h0, h]), tau=tau, nfe=field.nfe, eval_taus=list(field.eval_taus), field_outputs=outputs
    )


def path_roughness(field_outputs: list[torch.Tensor], h0: torch.Tensor, relative_to: str = "state") -> torch.Tensor:
    """Mean squared change of α·F between consecutive evaluations, relative to |H(0)|² ("state")
    or to the mean |α·F|² along the path ("field").

    Forward Euler is exact when the field is constant along the path; this term is
    what its global error grows with, so penalising it keeps a few Euler steps
    faithful to the continuous solution at no extra field evaluations. Relative to the
    state, the cheapest way to lower it is a smaller field (at the demo weight it holds the
    block near the identity at u = 0 early in training: pilots R0-R400,
    docs/journal.md#stage-1-pilots-p0-r400). Relative to the field itself it is blind to
    the field's size and asks only for a straight path.
    """
    if relative_to not in ("state", "field"):
        raise ValueError(f"relative_to must be 'state' or 'field', got {relative_to!r}")
    if len(field_outputs) < 2:
        return h0.new_zeros(())
    field_outputs = [out.float() for out in field_outputs]  # fp32 even under bf16 autocast: a small difference
    diffs = torch.stack([(b - a).pow(2).sum(-1) for a, b in zip(field_outputs[:-1], field_outputs[1:])])
    if relative_to == "field":
        size = torch.stack([out.pow(2).sum(-1) for out in field_outputs]).mean()
    else:
        size = h0.detach().float().pow(2).sum(-1).mean()
    return diffs.mean() / size.clamp_min(1e-8)


def relative_sq_distance(h: torch.Tensor, target: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of |h − target|², relative to the mean |H(0)|² (the scale rk4_error_estimate uses)."""
    error = (h.float() - target.float()).pow(2).sum(-1).mean()
    return error / h0.detach().float().pow(2).sum(-1).mean().clamp_min(1e-8)


def rk4_error_estimate(field_outputs: list[torch.Tensor], h0: torch.Tensor, steps: int) -> torch.Tensor:
    """The squared size of RK4's embedded error estimate, summed over its steps, relative to |H(0)|².

    torchdiffeq's RK4 (the 3/8 rule) evaluates k1..k4 at τ₀ + (0, 1/3, 2/3, 1)·h. From the same
    stages, y₀ + h·(k1 + 3·k3)/4 is a second-order step (Ralston's), so RK4 minus it,
    h/8·(k4 − 3·k3 + 3·k2 − k1), estimates the local error: a third difference of α·F along the
    step. Penalising it asks the field to change smoothly along each step (it may turn, which a
    straight-path penalty forbade), so the trained fixed solver follows the continuous solution
    that dopri5 measures, at no extra field evaluations.
    """
    if len(field_outputs) != 4 * steps:
        raise ValueError(f"RK4 with {steps} steps evaluates the field {4 * steps} times, got {len(field_outputs)}")
    h = 1.0 / steps
    error = sum(
        (h / 8) * (k4.float() - 3 * k3.float() + 3 * k2.float() - k1.float())
        for k1, k2, k3, k4 in zip(*[iter(field_outputs)] * 4)
    )
    return error.pow(2).sum(-1).mean() / h0.detach().float().pow(2).sum(-1).mean().clamp_min(1e-8)
