"""The hybrid continuous-depth transformer and its discrete baseline.

Hybrid ("sandwich"):  embed -> 2 causal blocks -> ODE block (τ: 0 -> 1, steered by u)
                      -> 2 causal blocks -> norm -> head (tied to the embedding)
Discrete baseline:    the same, with 2 ordinary blocks where the ODE block sits.

Both share one API, so the trainer, the sampler and the analysis code treat them alike:
    encode(idx)          embeddings + blocks before the middle   -> H(0)
    middle(h, u)         the ODE block (hybrid) or 2 blocks (discrete)
    decode(h)            blocks after the middle + norm + head   -> logits
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import CausalSelfAttention
from .depth_field import DepthVaryingField
from .ode import (
    TRAINING_SOLVER,
    BlockSolve,
    ControlledVectorField,
    SolverConfig,
    path_roughness,
    relative_sq_distance,
    rk4_error_estimate,
    solve_block,
)


@dataclass
class ModelConfig:
    arch: str = "hybrid"  # "hybrid" or "discrete"
    vocab_size: int = 4096
    block_size: int = 128  # context length in tokens
    d_model: int = 256
    n_heads: int = 4
    n_pre: int = 2  # discrete blocks before the middle
    n_mid: int = 2  # discrete blocks the ODE block replaces
    n_post: int = 2  # discrete blocks after the middle
    mlp_ratio: int = 4
    control_dim: int = 2  # (sentiment, style)
    control_embed_dim: int = 32
    field_hidden: int = 512
    field_heads: int = 0  # > 0: the field also attends over the tokens (a continuous transformer block)
    field_norm: str = "layer"  # "layer": LayerNorm(H(τ)); "entry": normalised with H(0)'s statistics (ode.py)
    alpha_init: float = 0.1
    split_control: bool = False  # the field embeds u > 0 and u < 0 with separate weights (ode.py)
    beyond_steering: bool = False  # |u| > 1 has its own share of the field's input (ode.py)
    # > 0: the field's weights are polynomials of this many terms in τ (depth_field.py); 0: shared across τ
    field_basis: int = 0
    solver: str = TRAINING_SOLVER.method  # the fixed-step solver the middle was trained with
    solver_steps: int = TRAINING_SOLVER.steps

    def __post_init__(self):
        if self.arch not in ("hybrid", "discrete"):
            raise ValueError(f"arch must be 'hybrid' or 'discrete', got {self.arch!r}")
        if self.d_model % self.n_heads or (self.field_heads and self.d_model % self.field_heads):
            raise ValueError("d_model must be divisible by n_heads and field_heads")
        if self.field_basis and (self.field_heads < 1 or self.field_norm != "layer" or self.split_control):
            raise ValueError("a depth-varying field (field_basis > 0) attends (field_heads > 0) with norm 'layer'")
        if not self.training_solver.is_fixed:
            raise ValueError(f"the training solver must be a fixed-step one, got {self.solver!r}")

    @property
    def training_solver(self) -> SolverConfig:
        return SolverConfig(self.solver, steps=self.solver_steps)

    @property
    def n_layers_equivalent(self) -> int:
        return self.n_pre + self.n_mid + self.n_post

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg.d_model, cfg.n_heads)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model)

    def forward(self, x, cache: dict | None = None):
        x = x + self.attn(self.ln1(x), cache)
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class _SandwichTransformer(nn.Module):
    """Embeddings, the blocks before and after the middle, final norm and tied head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.pre = nn.ModuleList(Block(cfg) for _ in range(cfg.n_pre))
        self.post = nn.ModuleList(Block(cfg) for _ in range(cfg.n_post))
        self.ln_f = nn.LayerNorm(cfg.d_model)

    @property
    def residual_std(self) -> float:
        return 0.02 / math.sqrt(2 * self.config.n_layers_equivalent)

    def _init_gpt_style(self):
        """Normal(0, 0.02) weights; residual projections scaled by 1/sqrt(2·layers) (GPT-2)."""
        residual_std = self.residual_std
        for name, module in self.named_modules():
            if name.startswith("field"):
                continue
            if isinstance(module, nn.Linear):
                std = residual_std if name.endswith("proj") else 0.02
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    def encode(self, idx: torch.Tensor, caches: list[dict] | None = None, start: int = 0) -> torch.Tensor:
        tokens = idx.shape[1]
        if start + tokens > self.config.block_size:
            raise ValueError(f"sequence of {start + tokens} tokens exceeds the context of {self.config.block_size}")
        pos = torch.arange(start, start + tokens, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for i, block in enumerate(self.pre):
            x = block(x, None if caches is None else caches[i])
        return x

    def decode(self, h: torch.Tensor, caches: list[dict] | None = None) -> torch.Tensor:
        offset = len(self.pre) + self._n_mid_cached
        for i, block in enumerate(self.post):
            h = block(h, None if caches is None else caches[offset + i])
        return self.ln_f(h) @ self.wte.weight.T

    @property
    def training_solver(self) -> SolverConfig:
        """The fixed-step solver the middle was trained with: the default wherever a solver is not chosen."""
        return self.config.training_solver

    def new_caches(self) -> list[dict]:
        return [{} for _ in range(len(self.pre) + self._n_mid_cached + len(self.post))]

    def num_parameters(self, include_embeddings: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        if not include_embeddings:
            n -= self.wte.weight.numel() + self.wpe.weight.numel()
        return n

    def forward(
        self,
        idx,
        u=None,
        solver: SolverConfig | None = None,
        roughness_relative_to: str = "state",
        reference_steps: int = 0,
    ):
        """Logits [batch, tokens, vocab] and, while training, the middle's penalties: {"roughness": path
        roughness (shared-weight field), "solver_error": RK4's embedded error estimate (depth-varying
        field), or with reference_steps > 0 its distance from RK4 in that many steps}, each a scalar tensor
        (empty for the discrete model and in eval mode)."""
        h0 = self.encode(idx)
        h1, penalties = self._middle_for_training(h0, u, solver, roughness_relative_to, reference_steps)
        return self.decode(h1), penalties


class HybridODETransformer(_SandwichTransformer):
    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        if cfg.field_basis:
            self.field = DepthVaryingField(
                cfg.d_model,
                cfg.control_dim,
                cfg.field_hidden,
                cfg.field_heads,
                cfg.field_basis,
                cfg.alpha_init,
                residual_std=self.residual_std,
            )
        else:
            self.field = ControlledVectorField(
                cfg.d_model,
                cfg.control_dim,
                cfg.control_embed_dim,
                cfg.field_hidden,
                cfg.alpha_init,
                mix_heads=cfg.field_heads,
                norm_mode=cfg.field_norm,
            )
        self._init_gpt_style()
        self.field.reset_parameters()
        if cfg.split_control:
            self.field.split_control_embedding()
        if cfg.beyond_steering:
            self.field.add_beyond_steering()

    def split_control(self):
        """Give u's two signs their own embedding, each a copy of the shared one (the same outputs)."""
        self.field.split_control_embedding()
        self.config = replace(self.config, split_control=True)

    def add_beyond_steering(self):
        """Give |u| > 1 its own directions, zero at first (the same outputs)."""
        self.field.add_beyond_steering()
        self.config = replace(self.config, beyond_steering=True)

    @property
    def _n_mid_cached(self):
        # a per-token field needs no cache; a token-mixing one keeps keys and values per evaluation
        return 1 if self.field.mixes_tokens else 0

    def can_cache(self, solver: SolverConfig) -> bool:
        """Whether cached decoding is exact: always for a per-token field, for fixed steps otherwise."""
        return not self.field.mixes_tokens or solver.is_fixed

    def control_or_zero(self, u, batch: int, device) -> torch.Tensor:
        if u is None:
            return torch.zeros(batch, self.config.control_dim, device=device)
        u = torch.as_tensor(u, dtype=torch.float32, device=device)
        return u.unsqueeze(0).expand(batch, -1) if u.dim() == 1 else u

    def middle(
        self, h0, u=None, solver: SolverConfig | None = None, tau=None, record_outputs: bool = False, caches=None
    ) -> BlockSolve:
        u = self.control_or_zero(u, h0.shape[0], h0.device)
        kv_cache = caches[len(self.pre)] if caches is not None and self.field.mixes_tokens else None
        return solve_block(self.field, h0, u, solver or self.training_solver, tau, record_outputs, kv_cache)

    def _middle_for_training(self, h0, u, solver, roughness_relative_to="state", reference_steps=0):
        solver = solver or self.training_solver
        result = self.middle(h0, u, solver, record_outputs=self.training)
        if not self.training:
            return result.final, {}
        if self.config.field_basis and solver.method == "rk4" and reference_steps:
            # the trained solve against a finer RK4 solve of the same field, held fixed: the error itself, where
            # the embedded estimate (a third difference of α·F within a step) misses much of a step of h = 1
            with torch.no_grad():
                target = self.middle(h0, u, SolverConfig("rk4", steps=reference_steps)).final
            return result.final, {"solver_error": relative_sq_distance(result.final, target, h0)}
        if self.config.field_basis and solver.method == "rk4":
            return result.final, {"solver_error": rk4_error_estimate(result.field_outputs, h0, solver.steps)}
        return result.final, {"roughness": path_roughness(result.field_outputs, h0, roughness_relative_to)}

    def ode_parameters(self):
        return self.field.parameters()


class DiscreteTransformer(_SandwichTransformer):
    """Baseline: the same model with n_mid ordinary blocks in the middle; ignores u."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.mid = nn.ModuleList(Block(cfg) for _ in range(cfg.n_mid))
        self._init_gpt_style()

    @property
    def _n_mid_cached(self):
        return len(self.mid)

    def can_cache(self, solver=None) -> bool:
        return True

    def middle(self, h0, u=None, solver=None, tau=None, record_outputs=False, caches=None) -> BlockSolve:
        states = [h0]
        for i, block in enumerate(self.mid):
            cache = None if caches is None else caches[len(self.pre) + i]
            states.append(block(states[-1], cache))
        grid = torch.linspace(0, 1, len(states), device=h0.device)
        return BlockSolve(states=torch.stack(states), tau=grid, nfe=len(self.mid), eval_taus=grid[:-1].tolist())

    def _middle_for_training(self, h0, u, solver, roughness_relative_to="state", reference_steps=0):
        return self.middle(h0).final, {}

    def ode_parameters(self):
        return self.mid.parameters()


def build_model(cfg: ModelConfig) -> _SandwichTransformer:
    return HybridODETransformer(cfg) if cfg.arch == "hybrid" else DiscreteTransformer(cfg)


def language_model_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = -1) -> torch.Tensor:
    """Mean token cross-entropy, always in fp32 (bf16 logits would round the softmax)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=pad_id)
