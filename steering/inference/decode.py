"""Fast decoding for fixed-step solvers: the same tokens as generate.sample_tokens, in fewer ops.

Decoding one token at a time is bound by per-op overhead and by streaming the weights, not
by arithmetic (the shipped model: 5.5 M multiply-adds a token against 22 MB of fp32 weights;
bench.decode_weight_macs). The general path (model.encode / middle / decode with dict caches)
issues ~200 small ops a token; this one
issues ~60, all of them on weights laid out once per model:

* every linear map stored transposed and contiguous ([in, out]), which a 1-row product
  reads faster than nn.Linear's [out, in] (the 256 x 7,168 head: 1.7x-3.2x in micro-benchmarks);
* a static KV cache per attention, keys and values interleaved [rows, heads, context, 2,
  head_dim], so a token's keys and values are one copy and no cache is ever concatenated;
* the field's state read (fc_in's state columns) and its attention's qkv map concatenated
  into one product, with the norm's gain folded into the weights and its bias, the
  control's features and each evaluation's τ term folded into one bias per evaluation
  (fixed for the whole generation: u does not change while a text is written);
* the field's two output maps (MLP and attention) concatenated into one product, with α
  (and for Euler, the step size) folded in and their biases as an extra weight row fed
  by a constant 1, so an Euler step is one addmm onto the state;
* the whole loop under torch.inference_mode.

Fixed-step solvers evaluate the field at the same τ for every token, which is what makes
the per-evaluation caches and biases exact; adaptive solvers keep the general path.
The arithmetic is the general path's reassociated (folded constants, a reciprocal for a
division), so logits agree to float32 rounding (~1e-6 relative), not bit for bit; the
tests check that greedy and seeded sampled tokens are identical to the general path's.
Sampling goes through sampling.next_tokens (as on the general path), so a draw is the same for the same logits.

bf16 weights were measured and not used: on this CPU (AVX-512 BF16, no AMX) torch's bf16
1-row products were no faster (the 256 x 7,168 head 0.94x-1.3x the fp32 time, a 256 x 1,280 map
1.6x-1.8x), and bf16 logits differ by 0.1 and more, so tokens would no longer match the general path.
torch.compile (inductor, torch 2.13 on CPU) was tried on this step and failed to compile it
(under inference_mode: "size_bytes_is_heap_allocated"; with the position dynamic: "SymInt ... not
tracked"); a static-shape version would recompile at every position or attend over the whole
context behind masks, and compiling on two cores competes with a < 10 s cold start. So: eager ops,
fewer of them.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from ..model.ode import SolverConfig
from .sampling import Cancelled, next_tokens

# Per fixed-step method: the field evaluations of one step in torchdiffeq. The first is always the field at the
# step's start (rk4 is its 3/8 rule: τ0, τ0 + h/3, τ0 + 2h/3, τ0 + h), so it is dH/dτ at that step end.
STAGES = {"euler": 1, "midpoint": 2, "rk4": 4}


def can_decode_fast(model, solver: SolverConfig) -> bool:
    """Whether the fast path gives the general path's tokens: any discrete model; a hybrid with a fixed-step solver.

    Only the two model classes themselves: a wrapper (activation steering adds a vector to
    encode's output) changes the computation the packed weights would skip."""
    from ..model.transformer import DiscreteTransformer, HybridODETransformer

    if type(model) not in (DiscreteTransformer, HybridODETransformer):
        return False
    if getattr(model.config, "arch", None) == "discrete":
        return True
    return solver.is_fixed and solver.method in STAGES and not solver.adjoint


# ---------------------------------------------------------------- packed weights
def _t(w: torch.Tensor) -> torch.Tensor:
    return w.detach().t().contiguous()


@dataclass
class _Attention:
    heads: int
    qkv_t: torch.Tensor  # [d, 3d]
    qkv_b: torch.Tensor  # [3d]
    proj_t: torch.Tensor  # [d, d]
    proj_b: torch.Tensor  # [d]


@dataclass
class _Block:
    ln1: tuple  # (weight, bias, eps)
    attn: _Attention
    ln2: tuple
    fc_t: torch.Tensor
    fc_b: torch.Tensor
    out_w: torch.Tensor  # [d, 4d], nn.Linear's layout: see _Field.out_w
    out_b: torch.Tensor


def _kv_interleaved(d: int, heads: int) -> torch.Tensor:
    """A column order for a qkv map's outputs: the queries, then per head its keys and its values."""
    dh = d // heads
    kv = torch.arange(d, 3 * d).view(2, heads, dh).transpose(0, 1).reshape(-1)
    return torch.cat([torch.arange(d), kv])


def _pack_attention(attn) -> _Attention:
    order = _kv_interleaved(attn.proj.in_features, attn.n_heads)
    w, b = attn.qkv.weight.detach()[order], attn.qkv.bias.detach()[order]
    return _Attention(attn.n_heads, _t(w), b, _t(attn.proj.weight), attn.proj.bias.detach())


def _ln(norm) -> tuple:
    return norm.weight.detach(), norm.bias.detach(), norm.eps


def _pack_block(block) -> _Block:
    return _Block(
        _ln(block.ln1),
        _pack_attention(block.attn),
        _ln(block.ln2),
        _t(block.fc.weight),
        block.fc.bias.detach(),
        block.proj.weight.detach(),
        block.proj.bias.detach(),
    )


@dataclass
class _Field:
    """The controlled vector field with its norm folded into one input product and its outputs into another."""

    norm_mode: str
    eps: float
    hidden: int
    heads: int  # 0: a per-token field
    in_t: torch.Tensor  # [d, hidden (+ 3d)]: gain-scaled state columns of fc_in (| gain-scaled qkv)
    in_const: torch.Tensor  # [hidden (+ 3d)]: the norm bias through those maps (+ qkv bias)
    w_tau: torch.Tensor  # [hidden]: fc_in's τ column
    # [d, hidden (+ d) + 1]: fc_out (| proj), then their summed bias; used transposed. Stored this way round (a
    # row per output) because a product down to d outputs from few rows runs 1.5x faster from it on CPU than from
    # the [in, out] copy (one row: 236 against 361 µs for 2,385 x 384; docs/journal.md, "Decoding's down-projections")
    out_w: torch.Tensor
    alpha: torch.Tensor
    activation: str = "softplus"  # the MLP's: softplus (shared-weight field) or gelu (depth-varying field)


def _pack_field(field) -> _Field:
    d = field.norm.normalized_shape[0]
    g, b = field.norm.weight.detach(), field.norm.bias.detach()
    w = field.fc_in.weight.detach()
    reads, consts = [w[:, :d] * g], [w[:, :d] @ b]
    outs, out_bias = [field.fc_out.weight.detach().t()], field.fc_out.bias.detach()
    heads = 0
    if field.mix is not None:
        heads = field.mix.n_heads
        order = _kv_interleaved(d, heads)
        qkv_w, qkv_b = field.mix.qkv.weight.detach()[order], field.mix.qkv.bias.detach()[order]
        reads.append(qkv_w * g)
        consts.append(qkv_w @ b + qkv_b)
        outs.append(field.mix.proj.weight.detach().t())
        out_bias = out_bias + field.mix.proj.bias.detach()
    return _Field(
        field.norm_mode,
        field.norm.eps,
        field.fc_in.out_features,
        heads,
        torch.cat(reads).t().contiguous(),
        torch.cat(consts),
        w[:, -1].clone(),
        torch.cat(outs + [out_bias[None]]).t().contiguous(),
        field.alpha.detach().clone(),
    )


def _pack_depth_field(field, tau: torch.Tensor) -> _Field:
    """A depth-varying field's weights at one τ (depth_field.py), laid out as _pack_field lays out a shared one.

    Its τ and control enter through the per-evaluation bias (_plan_solve), so w_tau is zero."""
    w = {k: v.detach() for k, v in field.weights_at(tau).items()}
    d = field.d_model
    g, b = w["norm_weight"], w["norm_bias"]
    order = _kv_interleaved(d, field.n_heads)
    qkv_w, qkv_b = w["qkv_weight"][order], w["qkv_bias"][order]
    reads = [w["fc_in_weight"] * g, qkv_w * g]
    consts = [w["fc_in_weight"] @ b + w["fc_in_bias"], qkv_w @ b + qkv_b]
    out_bias = w["fc_out_bias"] + w["proj_bias"]
    return _Field(
        "layer",
        1e-5,
        field.hidden,
        field.n_heads,
        torch.cat(reads).t().contiguous(),
        torch.cat(consts),
        torch.zeros(field.hidden),
        torch.cat([w["fc_out_weight"], w["proj_weight"], out_bias[:, None]], 1).contiguous(),
        field.alpha.detach().clone(),
        "gelu",
    )


class Packed:
    """A model's weights laid out for decoding; rebuilt when any parameter changes."""

    def __init__(self, model):
        self.arch = model.config.arch
        self.d = model.config.d_model
        self.block_size = model.config.block_size
        self.wte = model.wte.weight.detach()
        self.wpe = model.wpe.weight.detach()
        self.head_t = _t(model.wte.weight)
        self.ln_f = _ln(model.ln_f)
        self.pre = [_pack_block(b) for b in model.pre]
        self.post = [_pack_block(b) for b in model.post]
        self.mid = [_pack_block(b) for b in model.mid] if self.arch == "discrete" else []
        self.depth_varying = self.arch == "hybrid" and bool(model.config.field_basis)
        self._depth_field = model.field if self.depth_varying else None
        self.field = _pack_field(model.field) if self.arch == "hybrid" and not self.depth_varying else None
        self._at_tau: dict[float, _Field] = {}
        self._out_scaled: dict[tuple, torch.Tensor] = {}

    @property
    def hybrid(self) -> bool:
        return self.arch == "hybrid"

    def field_at(self, tau: torch.Tensor) -> _Field:
        """The field's packed weights at evaluation depth τ (the same for every τ unless depth-varying)."""
        if not self.depth_varying:
            return self.field
        key = float(tau)
        if key not in self._at_tau:
            with torch.no_grad():
                self._at_tau[key] = _pack_depth_field(self._depth_field, tau)
        return self._at_tau[key]

    def field_out(self, f: _Field, scale: float) -> torch.Tensor:
        """A packed field's output weights times α·scale (scale: the Euler step, or 1)."""
        key = (id(f), scale)
        if key not in self._out_scaled:
            self._out_scaled[key] = (f.out_w * (f.alpha * scale)).contiguous()
        return self._out_scaled[key]


_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _signature(model) -> tuple:
    """Changes whenever a parameter is written in place (its version) or replaced (its storage)."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def packed(model) -> Packed:
    """The model's packed weights, built once and again whenever a parameter changed (training, loading)."""
    sig = _signature(model)
    hit = _PACKED.get(model)
    if hit is None or hit[0] != sig:
        with torch.no_grad():
            hit = (sig, Packed(model))
        _PACKED[model] = hit
    return hit[1]


# ---------------------------------------------------------------- the per-token step
class _KV:
    """A static cache for one attention: keys and values interleaved, [rows, heads, context, 2, head_dim]."""

    __slots__ = ("buf", "keys", "values", "heads", "dh")

    def __init__(self, rows: int, heads: int, d: int, context: int, like: torch.Tensor):
        self.heads, self.dh = heads, d // heads
        self.buf = like.new_empty(rows, heads, context, 2, self.dh)
        self.keys, self.values = self.buf[..., 0, :], self.buf[..., 1, :]


def _attend(qkv: torch.Tensor, kv: _KV, rows: int, tokens: int, start: int) -> torch.Tensor:
    """Causal attention of `tokens` new tokens per row after `start` cached ones.

    qkv [rows*tokens, 3d] in the packed column order: queries, then each head's keys and values
    side by side (_kv_interleaved), so they land in the cache with one copy."""
    h, dh = kv.heads, kv.dh
    d = h * dh
    end = start + tokens
    if tokens == 1:  # the hot path: narrow/select rather than indexing, a few µs less per attention
        kv.buf.select(2, start).copy_(qkv.narrow(1, d, 2 * d).view(rows, h, 2, dh))
        y = F.scaled_dot_product_attention(
            qkv.narrow(1, 0, d).view(rows, h, 1, dh), kv.keys.narrow(2, 0, end), kv.values.narrow(2, 0, end)
        )
        return y.view(rows, d)
    kv.buf[:, :, start:end] = qkv[:, d:].view(rows, tokens, h, 2, dh).transpose(1, 2)
    q = qkv[:, :d].view(rows, tokens, h, dh).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, kv.keys[:, :, :end], kv.values[:, :, :end], is_causal=start == 0)
    return y.transpose(1, 2).reshape(rows * tokens, d)


def _block(x: torch.Tensor, blk: _Block, kv: _KV, rows: int, tokens: int, start: int) -> torch.Tensor:
    """A transformer block on new tokens; x [rows*tokens, d] is updated in place (residual adds)."""
    d = x.shape[-1]
    y = _attend(torch.addmm(blk.attn.qkv_b, F.layer_norm(x, (d,), *blk.ln1), blk.attn.qkv_t), kv, rows, tokens, start)
    x = x.addmm_(y, blk.attn.proj_t).add_(blk.attn.proj_b)
    m = F.gelu(torch.addmm(blk.fc_b, F.layer_norm(x, (d,), *blk.ln2), blk.fc_t))
    return x.addmm_(m, blk.out_w.t()).add_(blk.out_b)


@dataclass
class _Solve:
    """Per generation: the field's constants for these rows' controls at each evaluation."""

    method: str
    dt: float
    fields: list[_Field]  # per evaluation: the packed field at its τ
    biases: list[torch.Tensor]  # per evaluation: [rows, hidden (+ 3d)]
    out_ws: list[torch.Tensor]  # per evaluation: output weights times α (times dt for Euler)


@lru_cache(maxsize=64)
def stage_taus(method: str, steps: int) -> tuple[torch.Tensor, ...]:
    """τ of every field evaluation of one solve from 0 to 1, as float32 scalars computed as the general path
    does: ode._euler_endpoints for Euler, torchdiffeq's own grid and stages (recorded from a dummy solve) otherwise."""
    if method == "euler":
        dt = 1.0 / steps
        return tuple(torch.tensor(k * dt) for k in range(steps))
    from torchdiffeq import odeint

    taus = []

    def record(t, y):
        taus.append(t.detach().clone())
        return torch.zeros_like(y)

    odeint(record, torch.zeros(1), torch.tensor([0.0, 1.0]), method=method, options={"step_size": 1.0 / steps})
    return tuple(taus)


def _plan_solve(p: Packed, model, u: torch.Tensor, solver: SolverConfig) -> _Solve:
    taus = stage_taus(solver.method, solver.steps)
    fields = [p.field_at(tau) for tau in taus]
    features = model.field.control_features(u.to(fields[0].in_t.dtype))
    dt = 1.0 / solver.steps
    scale = dt if solver.method == "euler" else 1.0
    biases = []
    for tau, f in zip(taus, fields):
        if p.depth_varying:  # the control's share at this τ, [rows, hidden]; fc_in's bias is in in_const
            control = model.field.control_shift_at(features, tau)[:, 0]
        else:  # [rows, hidden], with fc_in's bias, plus the τ column
            control = features[:, 0] + tau.to(f.w_tau.dtype) * f.w_tau
        mlp = f.in_const[: f.hidden] + control
        biases.append(torch.cat([mlp, f.in_const[f.hidden :].expand(mlp.shape[0], -1)], 1) if f.heads else mlp)
    return _Solve(solver.method, dt, fields, biases, [p.field_out(f, scale) for f in fields])


class _Step:
    """One forward of new tokens for `rows` rows through the packed model, writing the static caches."""

    def __init__(self, model, p: Packed, rows: int, u: torch.Tensor | None, solver: SolverConfig | None):
        self.p, self.rows = p, rows
        like = p.wte
        context = p.block_size
        self.pre_kv = [_KV(rows, b.attn.heads, p.d, context, like) for b in p.pre]
        self.post_kv = [_KV(rows, b.attn.heads, p.d, context, like) for b in p.post]
        self.mid_kv = [_KV(rows, b.attn.heads, p.d, context, like) for b in p.mid]
        self.solve = None
        if p.hybrid:
            self.solve = _plan_solve(p, model, u, solver)
            f = self.solve.fields[0]
            self.field_kv = [_KV(rows, f.heads, p.d, context, like) for _ in self.solve.biases] if f.heads else []
            self.nfe = len(self.solve.biases)
        else:
            self.nfe = len(p.mid)
        self._buf: dict[int, tuple] = {}

    def _cat_buffer(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[n, hidden (+ d) + 1]: the field's inputs to its output product (softplus | attention | 1), and
        views of its first two parts."""
        bufs = self._buf.get(n)
        if bufs is None:
            f = self.solve.fields[0]
            buf = self.p.wte.new_empty(n, f.out_w.shape[1])
            buf[:, -1] = 1.0
            bufs = self._buf[n] = (
                buf,
                buf.narrow(1, 0, f.hidden),
                buf.narrow(1, f.hidden, buf.shape[1] - 1 - f.hidden),
            )
        return bufs

    def _field(
        self,
        h: torch.Tensor,
        k: int,
        out_w: torch.Tensor,
        rows_bias: torch.Tensor,
        stats,
        tokens: int,
        start: int,
        onto: torch.Tensor | None,
    ) -> torch.Tensor:
        """α·F (times the folded step) at evaluation k; added onto `onto` when given (the Euler update)."""
        f = self.solve.fields[k]
        if f.norm_mode == "entry":
            a = torch.sub(h, stats[0]).mul_(stats[1])
        else:
            a = F.layer_norm(h, (h.shape[-1],), None, None, f.eps)
        z = torch.addmm(rows_bias, a, f.in_t)
        buf, activated, attended = self._cat_buffer(h.shape[0])
        if f.activation == "gelu":
            torch._C._nn.gelu(z.narrow(1, 0, f.hidden), out=activated)
        else:
            torch._C._nn.softplus(z.narrow(1, 0, f.hidden), 1, 20, out=activated)
        if f.heads:
            attended.copy_(
                _attend(z.narrow(1, f.hidden, z.shape[1] - f.hidden), self.field_kv[k], self.rows, tokens, start)
            )
        if onto is None:
            return torch.mm(buf, out_w.t())
        return onto.addmm_(buf, out_w.t())

    def _middle(self, h0: torch.Tensor, tokens: int, start: int, path: list | None = None) -> torch.Tensor:
        """H(1) from H(0) for the new tokens. path (a list) receives (H, dH/dτ) at each step's start, then (H(1),
        None), each [rows, tokens, d]: the solve's stations and the slopes its first stages computed there."""
        s, f = self.solve, self.solve.fields[0]
        stats = None
        if f.norm_mode == "entry":
            var, mean = torch.var_mean(h0, -1, correction=0, keepdim=True)
            stats = (mean, var.add_(f.eps).rsqrt_())
        biases = s.biases if tokens == 1 else [b.repeat_interleave(tokens, 0) for b in s.biases]

        def keep(h, slope):  # copies: the blocks after the middle update their input in place
            if path is not None:
                shape = (self.rows, tokens, -1)
                path.append((h.view(shape).clone(), None if slope is None else slope.view(shape).clone()))

        if s.method == "euler":
            h = h0
            for k, bias in enumerate(biases):
                if path is None:
                    h = self._field(h, k, s.out_ws[k], bias, stats, tokens, start, onto=h)
                else:  # the update apart, to keep it (its weights carry the step: dH/dτ is it over dt)
                    dy = self._field(h, k, s.out_ws[k], bias, stats, tokens, start, None)
                    keep(h, dy / s.dt)
                    h = h + dy
            keep(h, None)
            return h

        def fk(k, state):
            return self._field(state, k, s.out_ws[k], biases[k], stats, tokens, start, None)

        dt = s.dt
        h, k = h0, 0
        per = STAGES[s.method]
        for _ in range(len(biases) // per):
            if s.method == "midpoint":  # torchdiffeq's midpoint step
                f0 = fk(k, h)
                keep(h, f0)
                dy = dt * fk(k + 1, h + f0 * (0.5 * dt))
            else:  # torchdiffeq's rk4 (the 3/8 rule)
                k1 = fk(k, h)
                keep(h, k1)
                k2 = fk(k + 1, h + dt * k1 * (1 / 3))
                k3 = fk(k + 2, h + dt * (k2 - k1 * (1 / 3)))
                k4 = fk(k + 3, h + dt * (k1 - k2 + k3))
                dy = (k1 + 3 * (k2 + k3) + k4) * dt * 0.125
            h = h + dy
            k += per
        keep(h, None)
        return h

    def __call__(
        self, idx: torch.Tensor, start: int, every_token: bool = False, path: list | None = None
    ) -> torch.Tensor:
        """Logits of the last new token of each row, [rows, vocab] (every_token: of all, [rows, tokens, vocab]);
        idx [rows, tokens] at positions start, start + 1, ... path: see _middle (a hybrid's)."""
        p, rows = self.p, self.rows
        tokens = idx.shape[1]
        x = F.embedding(idx.reshape(-1), p.wte)
        if tokens == 1:
            x = x.add_(p.wpe[start])
        else:
            x = x.view(rows, tokens, -1).add_(p.wpe[start : start + tokens]).view(rows * tokens, -1)
        for blk, kv in zip(p.pre, self.pre_kv):
            x = _block(x, blk, kv, rows, tokens, start)
        if p.hybrid:
            x = self._middle(x, tokens, start, path)
        else:
            for blk, kv in zip(p.mid, self.mid_kv):
                x = _block(x, blk, kv, rows, tokens, start)
        for blk, kv in zip(p.post, self.post_kv):
            x = _block(x, blk, kv, rows, tokens, start)
        if every_token:
            return torch.mm(F.layer_norm(x, (p.d,), *p.ln_f), p.head_t).view(rows, tokens, -1)
        if tokens > 1:
            x = x.view(rows, tokens, -1)[:, -1]
        return torch.mm(F.layer_norm(x, (p.d,), *p.ln_f), p.head_t)


def new_stepper(model, rows: int, u: torch.Tensor | None, solver: SolverConfig) -> _Step:
    """A forward for `rows` rows with their controls u [rows, c] (hybrid) and fresh static caches."""
    if not can_decode_fast(model, solver):
        raise ValueError(f"the fast decoder needs a fixed-step solver; {solver.method} picks its steps per solve")
    return _Step(model, packed(model), rows, u, solver)


@torch.inference_mode()
def fast_sample_tokens(
    model,
    ids: list[int],
    u: torch.Tensor,
    max_new_tokens: int,
    *,
    n: int = 1,
    sampling=None,
    seed: int = 0,
    solver: SolverConfig,
    gens: list | None = None,
    cancelled=None,
    on_prompt=None,
    prompt_path: list | None = None,
) -> tuple[torch.Tensor, int]:
    """generate.sample_tokens' result (new token ids [n, max_new_tokens], total NFE) on the fast path.

    u [n or 1, c]. With `gens` (one torch.Generator per row) each row draws from its own
    generator, as n separate one-row calls would; otherwise all rows share one, as in
    sample_tokens. cancelled() is polled between tokens: when it returns True the decoding
    stops with sampling.Cancelled. on_prompt(logits [n, vocab]) sees the prompt's last logits;
    prompt_path (a list; a hybrid's) receives the prompt's solve, (H, dH/dτ) at each step end (_Step._middle).
    """
    if not ids or len(ids) + max_new_tokens - 1 > model.config.block_size:
        raise ValueError(
            f"sequence of {len(ids) + max_new_tokens - 1} tokens exceeds the context of {model.config.block_size}"
        )
    device = model.wte.weight.device
    u = torch.as_tensor(u, dtype=torch.float32, device=device).reshape(-1, model.config.control_dim).expand(n, -1)
    step = new_stepper(model, n, u, solver)
    history = torch.empty(n, len(ids) + max_new_tokens, dtype=torch.long, device=device)
    history[:, : len(ids)] = torch.tensor(ids, dtype=torch.long, device=device)
    gen = torch.Generator(device="cpu").manual_seed(seed) if gens is None else None
    length = len(ids)
    logits = step(history[:, :length], 0, path=prompt_path)
    if on_prompt is not None:
        on_prompt(logits)
    for i in range(max_new_tokens):
        nxt = next_tokens(logits, history[:, :length], sampling, gen if gens is None else gens)
        history[:, length : length + 1] = nxt
        length += 1
        if i + 1 < max_new_tokens:
            if cancelled is not None and cancelled():
                raise Cancelled()
            logits = step(nxt, length - 1)
    return history[:, len(ids) :].clone(), step.nfe * max_new_tokens
