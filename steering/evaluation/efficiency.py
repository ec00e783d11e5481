"""The efficiency measurements behind `bench`: the hybrid against the discrete baseline, side by side in one run.

Every figure is a ratio of two measurements taken in the same process (or, for
memory, in twin subprocesses started the same way), so the load on the machine
cancels out as far as it can:

* forward latency, hybrid / discrete, batch 8 x 128 tokens, no grad, the hybrid's own
  training solver (Euler 4 for the shared-weight field, RK4 for the depth-varying one); for a
  hybrid trained otherwise, the same at Euler 4 beside it, with both solvers' divergence from
  dopri5. The two models run alternately, one warm-up each, and the
  median of `repeats` runs of each is compared.
* FLOP ratio, hybrid / discrete, counted analytically from the two configs: every
  matrix product of one forward pass at 2 FLOPs per multiply-add (attention scores
  and values counted over the full T x T square, as a dense kernel computes them).
  It is the floor the latency ratio can reach while both models are bound by their
  matrix products. `FlopCounterMode` is run as a cross-check; on CPU it does not see
  inside `scaled_dot_product_attention` (its CPU kernel has no FLOP formula), so the
  counted figure is compared with the analytic count without attention.
* generation tokens/s of the hybrid with the KV cache over without it, greedy, from a
  prompt that with the new tokens fills the 128-token context.
* decoding tokens/s of the hybrid at batch 1 on one thread, greedy, a 96-token prompt and 32
  new tokens: the fast path (steering/inference/decode.py) against the general one (the same cached
  sampler with fast=False), runs alternating. A token's time is the difference between
  generating 32 tokens and generating 1, over 31, so the prompt's prefill is not billed to
  the decode rate. The floor beside it: one matrix product with as many weights as a token's
  products use (decode_weight_macs), timed in fp32 and bf16, the faster kept.
* training-step peak memory of the hybrid (forward with the middle's penalty as in
  training, cross-entropy, backward), 64 against 4 Euler steps, with the adjoint method
  and with direct backprop. Method: each configuration runs in a fresh Python
  subprocess with glibc's mmap threshold fixed (MALLOC_MMAP_THRESHOLD_), so freed
  tensors go back to the OS instead of staying in the heap. The subprocess loads the
  model, runs one small warm-up step (batch 1, 8 tokens, so lazy kernel set-up is
  not billed to the step), frees the gradients, and takes the resident set size as the
  baseline. It then resets the kernel's peak-RSS mark (writing 5 to
  /proc/self/clear_refs) and runs one full training step; the growth is the peak RSS
  (VmHWM) minus the baseline. Where the peak mark cannot be reset, the peak comes
  from getrusage(ru_maxrss), which then also holds the load and warm-up peaks; the
  result says which was used (`memory_method`).
* the time of the 41-point NFE sweep over sentiment -2 ... +2 (the regimes view):
  `steering.analysis.regimes.nfe_regimes` when it is installed, else 41 dopri5 solves of
  the ODE block for a 16-token prompt.

All latency and memory figures only mean something at the demo size; `--random-demo`
builds randomly initialised demo-size models so the bench runs without shipped weights.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data.heldout import heldout_prompts
from ..model.ode import TRAINING_SOLVER, SolverConfig
from ..model.transformer import DiscreteTransformer, HybridODETransformer, ModelConfig
from .measures import solver_divergence

DEMO_CONFIG = dict(d_model=256, n_heads=4, vocab_size=4096, block_size=128, field_hidden=512, control_embed_dim=32)
LATENCY_BATCH, LATENCY_TOKENS = 8, 128
MEMORY_BATCH, MEMORY_TOKENS = 8, 128
GENERATION_CONTEXT, GENERATION_NEW_TOKENS = 128, 32
SWEEP_POINTS, SWEEP_PROMPT_TOKENS = 41, 16
SWEEP_SOLVER = SolverConfig("dopri5", rtol=1e-3, atol=1e-4)
SWEEP_PROMPT = "The film opens on a quiet street, and for a while nothing much happens"
MIN_REPEATS = 7
REPO_ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- FLOPs


def forward_flops(
    cfg: ModelConfig, batch: int, tokens: int, field_evals: int = TRAINING_SOLVER.steps, attention: bool = True
) -> int:
    """Matrix-product FLOPs of one forward pass (2 per multiply-add), from the config alone.

    field_evals: vector-field evaluations of the ODE block (Euler: one per step); unused
    for the discrete model. attention=False leaves out the QK^T and AV products.
    """
    d, n = cfg.d_model, batch * tokens
    block = 2 * n * (3 * d * d + d * d + 2 * cfg.mlp_ratio * d * d)
    if attention:
        block += 2 * 2 * batch * tokens * tokens * d
    head = 2 * n * d * cfg.vocab_size
    if cfg.arch == "discrete":
        middle = cfg.n_mid * block
    else:
        # the control's share of the first layer is computed once per solve (ode.control_features);
        # τ's share is a scaled vector, no matrix product
        per_eval = 2 * n * (d * cfg.field_hidden + cfg.field_hidden * d)
        if cfg.field_heads:  # the token-mixing field's attention: qkv and output projections
            per_eval += 2 * n * 4 * d * d + (2 * 2 * batch * tokens * tokens * d if attention else 0)
        per_solve = 2 * batch * (cfg.control_dim * cfg.control_embed_dim + cfg.control_embed_dim * cfg.field_hidden)
        if cfg.field_basis:
            # the depth-varying field: the control's share per basis term once a solve (and |u| > 1's two
            # maps), mixed at each evaluation's τ; the weights at each τ are mixed once and cached, so a
            # warm forward (what the latency times) does not count them
            k = cfg.field_basis
            per_solve = 2 * batch * cfg.control_dim * cfg.field_hidden * (k + (2 if cfg.beyond_steering else 0))
            per_eval += 2 * k * batch * cfg.field_hidden
        middle = field_evals * per_eval + per_solve
    return (cfg.n_pre + cfg.n_post) * block + middle + head


def counted_forward_flops(model, idx: torch.Tensor, solver: SolverConfig = TRAINING_SOLVER) -> int:
    """FLOPs of one warm forward pass as torch.utils.flop_counter sees them (on CPU: without attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    u = torch.zeros(idx.shape[0], model.config.control_dim)
    with torch.no_grad():
        model(idx, u, solver)  # warm: a depth-varying field's weights at each τ are mixed once, then cached
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(idx, u, solver)
    return int(counter.get_total_flops())


def decode_weight_macs(cfg: ModelConfig, solver: SolverConfig = TRAINING_SOLVER) -> int:
    """Multiply-adds of one decoded token against weight matrices (blocks, field evaluations, head).

    Attention's products with the cached keys and values are left out: they read the cache, not
    weights, and depend on the position. The field evaluates `nfe` times per token (Euler: once a step).
    """
    from ..inference.decode import STAGES

    d = cfg.d_model
    block = (4 + 2 * cfg.mlp_ratio) * d * d
    if cfg.arch == "discrete":
        middle = cfg.n_mid * block
    else:
        evals = solver.steps * STAGES.get(solver.method, 1)
        middle = evals * (2 * d * cfg.field_hidden + (4 * d * d if cfg.field_heads else 0))
    return (cfg.n_pre + cfg.n_post) * block + middle + d * cfg.vocab_size


# ---------------------------------------------------------------- latency


@dataclass
class LatencyResult:
    hybrid_s: list[float]
    discrete_s: list[float]

    @property
    def hybrid_median_s(self) -> float:
        return statistics.median(self.hybrid_s)

    @property
    def discrete_median_s(self) -> float:
        return statistics.median(self.discrete_s)

    @property
    def ratio(self) -> float:
        return self.hybrid_median_s / self.discrete_median_s


def control_rows(model, rows: int, control=()) -> torch.Tensor:
    """[rows, control_dim]: the control's values in every row (u = 0 when empty)."""
    values = list(control) or [0.0] * model.config.control_dim
    if len(values) != model.config.control_dim:
        raise ValueError(f"the control has {len(values)} values; the model takes {model.config.control_dim}")
    return torch.tensor([values] * rows, dtype=torch.float32)


def _time_call(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_latency(
    hybrid,
    discrete,
    batch: int = LATENCY_BATCH,
    tokens: int = LATENCY_TOKENS,
    repeats: int = MIN_REPEATS,
    solver: SolverConfig = TRAINING_SOLVER,
    seed: int = 0,
    control=(),
) -> LatencyResult:
    """No-grad forward time of each model on the same batch, runs alternating, one warm-up each; the hybrid at
    `control` (its values; empty: u = 0)."""
    tokens = min(tokens, hybrid.config.block_size, discrete.config.block_size)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, min(hybrid.config.vocab_size, discrete.config.vocab_size), (batch, tokens), generator=gen)
    u = control_rows(hybrid, batch, control)
    runs = {"hybrid": [], "discrete": []}
    with torch.no_grad():
        for model in (hybrid, discrete):
            model(idx, u, solver)
        for _ in range(repeats):
            runs["hybrid"].append(_time_call(lambda: hybrid(idx, u, solver)))
            runs["discrete"].append(_time_call(lambda: discrete(idx, u, solver)))
    return LatencyResult(runs["hybrid"], runs["discrete"])


def measure_fused_latency(
    hybrid,
    discrete,
    batch: int = LATENCY_BATCH,
    tokens: int = LATENCY_TOKENS,
    repeats: int = MIN_REPEATS,
    solver: SolverConfig = TRAINING_SOLVER,
    seed: int = 0,
    control=(),
) -> LatencyResult:
    """As measure_latency, through the decoder's fused forward (inference/decode.py) of every token's logits."""
    from ..inference.decode import new_stepper

    tokens = min(tokens, hybrid.config.block_size, discrete.config.block_size)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, min(hybrid.config.vocab_size, discrete.config.vocab_size), (batch, tokens), generator=gen)
    u = control_rows(hybrid, batch, control)

    def forward(model):
        with torch.inference_mode():
            return new_stepper(model, batch, u, solver)(idx, 0, every_token=True)

    runs = {"hybrid": [], "discrete": []}
    forward(hybrid), forward(discrete)
    for _ in range(repeats):
        runs["hybrid"].append(_time_call(lambda: forward(hybrid)))
        runs["discrete"].append(_time_call(lambda: forward(discrete)))
    return LatencyResult(runs["hybrid"], runs["discrete"])


INFERENCE_EULER = SolverConfig("euler", steps=4)
DIVERGENCE_PROMPTS, DIVERGENCE_US = 6, (-2.0, 0.0, 2.0)  # as `python -m steering depth`
BPB_OPENINGS_PER_GROUP = 25  # held-out openings per (label, source): 100 texts, a few seconds per solver


def fixed_step_nfe(solver: SolverConfig) -> int:
    """Field evaluations of one fixed-step solve."""
    from ..inference.decode import STAGES

    return solver.steps * STAGES[solver.method]


def euler_point(hybrid, discrete, tok, batch: int, tokens: int, repeats: int, control=()) -> dict:
    """The hybrid solved with Euler 4 in place of its training solver: latency and FLOP ratios against the
    discrete model, measured as the trained solver's are, and both solvers' divergence from dopri5 (rtol 1e-6)
    on held-out prompts (random ones without a tokenizer) at u = -2, 0, 2; with a tokenizer, also the bits
    per byte each solver gives on held-out openings (what the cheaper solve costs in language modelling)."""
    latency = measure_latency(hybrid, discrete, batch, tokens, repeats, INFERENCE_EULER, control=control)
    flops = forward_flops(hybrid.config, batch, tokens, fixed_step_nfe(INFERENCE_EULER)) / forward_flops(
        discrete.config, batch, tokens
    )
    if tok is not None:
        prompts = heldout_prompts(tok, DIVERGENCE_PROMPTS)
    else:
        gen = torch.Generator().manual_seed(0)
        prompts = torch.randint(0, hybrid.config.vocab_size, (DIVERGENCE_PROMPTS, 32), generator=gen).tolist()
    with torch.no_grad():
        divergence = solver_divergence(hybrid, prompts, DIVERGENCE_US, INFERENCE_EULER)
        trained = solver_divergence(hybrid, prompts, DIVERGENCE_US)
    bpb = {}
    if tok is not None:
        from .evaluate import bits_per_byte, heldout_openings

        openings = heldout_openings(BPB_OPENINGS_PER_GROUP)
        bpb = {
            "bits_per_byte": bits_per_byte(hybrid, tok, openings, solver=INFERENCE_EULER),
            "bits_per_byte_trained": bits_per_byte(hybrid, tok, openings),
            "bits_per_byte_openings": len(openings),
        }
    return {
        "solver": INFERENCE_EULER.label(),
        "nfe": fixed_step_nfe(INFERENCE_EULER),
        "latency_ratio": latency.ratio,
        "flop_ratio": flops,
        "hybrid_forward_ms": latency.hybrid_median_s * 1e3,
        "solver_divergence": divergence,
        "solver_divergence_trained": trained,
        **bpb,
    }


# ---------------------------------------------------------------- generation with and without the KV cache


@dataclass
class CacheResult:
    new_tokens: int
    prompt_tokens: int
    cached_s: list[float]
    uncached_s: list[float]
    same_tokens: bool  # greedy decoding must give the same tokens either way

    @property
    def cached_tokens_per_s(self) -> float:
        return self.new_tokens / statistics.median(self.cached_s)

    @property
    def uncached_tokens_per_s(self) -> float:
        return self.new_tokens / statistics.median(self.uncached_s)

    @property
    def speedup(self) -> float:
        return self.cached_tokens_per_s / self.uncached_tokens_per_s


def measure_kv_cache(
    model,
    context: int = GENERATION_CONTEXT,
    new_tokens: int = GENERATION_NEW_TOKENS,
    repeats: int = MIN_REPEATS,
    seed: int = 0,
    control=(),
) -> CacheResult:
    """Greedy generation of `new_tokens` after a prompt that together with them fills `context` tokens."""
    from ..inference.generate import sample_tokens
    from ..inference.sampling import GREEDY

    context = min(context, model.config.block_size)
    new_tokens = min(new_tokens, context - 1)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (context - new_tokens,), generator=gen).tolist()
    u = control_rows(model, 1, control)

    def run(use_cache: bool):  # the general path either way: this figure is about the cache alone
        return sample_tokens(model, prompt, u, new_tokens, sampling=GREEDY, use_cache=use_cache, fast=False)[0]

    same = bool(torch.equal(run(True), run(False)))  # also the warm-up
    cached, uncached = [], []
    for _ in range(repeats):
        cached.append(_time_call(lambda: run(True)))
        uncached.append(_time_call(lambda: run(False)))
    return CacheResult(new_tokens, len(prompt), cached, uncached, same)


# ---------------------------------------------------------------- decoding: fast path, general path, floor


@dataclass
class DecodeResult:
    new_tokens: int
    prompt_tokens: int
    fast_s: dict  # {1: runs, new_tokens: runs}, seconds
    general_s: dict
    same_tokens: bool  # greedy: the fast path must give the general path's tokens
    floor_s: float  # one product with a token's weight multiply-adds, the faster dtype
    floor_dtype: str
    floor_macs: int
    floor_s_by_dtype: dict = field(default_factory=dict)

    def _per_token_s(self, runs: dict) -> float:
        if self.new_tokens < 2:
            return statistics.median(runs[self.new_tokens]) / self.new_tokens
        one, many = statistics.median(runs[1]), statistics.median(runs[self.new_tokens])
        return max(many - one, 1e-9) / (self.new_tokens - 1)

    @property
    def fast_ms_per_token(self) -> float:
        return self._per_token_s(self.fast_s) * 1e3

    @property
    def general_ms_per_token(self) -> float:
        return self._per_token_s(self.general_s) * 1e3

    @property
    def fast_tokens_per_s(self) -> float:
        return 1e3 / self.fast_ms_per_token

    @property
    def general_tokens_per_s(self) -> float:
        return 1e3 / self.general_ms_per_token

    @property
    def speedup(self) -> float:
        return self.fast_tokens_per_s / self.general_tokens_per_s

    def end_to_end_tokens_per_s(self, runs: dict) -> float:
        """With the prompt's prefill billed: new tokens over the whole call."""
        return self.new_tokens / statistics.median(runs[self.new_tokens])


def measure_matmul_floor(
    cfg: ModelConfig, solver: SolverConfig = TRAINING_SOLVER, repeats: int = MIN_REPEATS, inner: int = 20
) -> tuple[float, str, int, dict]:
    """(seconds, dtype, macs, {dtype: seconds}): one [1, d] x [d, macs / d] product, median of `repeats` means of
    `inner` calls, in fp32 and bf16; the faster dtype is the floor."""
    macs = decode_weight_macs(cfg, solver)
    d = cfg.d_model
    gen = torch.Generator().manual_seed(0)
    weights = torch.randn(d, max(1, macs // d), generator=gen) * 0.02
    x = torch.randn(1, d, generator=gen)
    times = {}
    with torch.inference_mode():
        for dtype in (torch.float32, torch.bfloat16):
            w, v = weights.to(dtype), x.to(dtype)
            torch.mm(v, w)
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(inner):
                    torch.mm(v, w)
                runs.append((time.perf_counter() - start) / inner)
            times[str(dtype).replace("torch.", "")] = statistics.median(runs)
    best = min(times, key=times.get)
    return times[best], best, macs, times


def measure_decode(
    model,
    context: int = GENERATION_CONTEXT,
    new_tokens: int = GENERATION_NEW_TOKENS,
    repeats: int = MIN_REPEATS,
    seed: int = 0,
    threads: int = 1,
    control=(),
) -> DecodeResult:
    """Greedy decoding at batch 1 on `threads` torch threads: fast path and general path, alternating."""
    from ..inference.generate import sample_tokens
    from ..inference.sampling import GREEDY

    context = min(context, model.config.block_size)
    new_tokens = max(1, min(new_tokens, context - 1))
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (context - new_tokens,), generator=gen).tolist()
    u = control_rows(model, 1, control)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:

        def run(fast: bool, n: int):
            return sample_tokens(model, prompt, u, n, sampling=GREEDY, fast=fast)[0]

        same = bool(torch.equal(run(True, new_tokens), run(False, new_tokens)))  # also the warm-up
        counts = sorted({1, new_tokens})
        fast = {n: [] for n in counts}
        general = {n: [] for n in counts}
        for _ in range(repeats):
            for n in counts:
                fast[n].append(_time_call(lambda n=n: run(True, n)))
                general[n].append(_time_call(lambda n=n: run(False, n)))
        floor_s, floor_dtype, macs, by_dtype = measure_matmul_floor(
            model.config, model.training_solver, repeats=repeats
        )
    finally:
        torch.set_num_threads(previous_threads)
    return DecodeResult(new_tokens, len(prompt), fast, general, same, floor_s, floor_dtype, macs, by_dtype)


# ---------------------------------------------------------------- training-step peak memory


def memory_ratio(many: MemoryResult, few: MemoryResult) -> float:
    if few.growth_bytes <= 0:
        raise RuntimeError(
            f"the memory probe saw no growth for {few.steps} steps ({few.method}); run the bench on a quieter machine"
        )
    return many.growth_bytes / few.growth_bytes


@dataclass
class MemoryResult:
    steps: int
    adjoint: bool
    growth_bytes: int  # peak RSS during the step minus RSS just before it
    baseline_bytes: int
    method: str  # "VmHWM after clear_refs" or "ru_maxrss"
    step_s: float

    @property
    def growth_mb(self) -> float:
        return self.growth_bytes / 2**20


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("VmHWM not in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _maxrss_bytes() -> int:
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kilobytes on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _load_models(spec: dict):
    if spec["source"] == "random":
        return random_demo_models(spec.get("config", DEMO_CONFIG), seed=spec.get("seed", 0))
    from ..training.checkpoint import load_checkpoint

    hybrid, _, _ = load_checkpoint(spec["checkpoint"])
    return hybrid, None


def training_step(model, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor, solver: SolverConfig):
    """One training step's forward and backward, as the trainer computes it (LM loss + the middle's penalties)."""
    logits, penalties = model(x, u, solver)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)) + sum(penalties.values())
    loss.backward()


def memory_probe(spec: dict) -> dict:
    """Runs inside the fresh subprocess: the peak memory growth of one training step."""
    torch.manual_seed(0)
    model, _ = _load_models(spec)
    model.train()
    cfg = model.config
    solver = SolverConfig("euler", steps=spec["steps"], adjoint=spec["adjoint"])
    tokens = min(spec["tokens"], cfg.block_size)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (spec["batch"], tokens + 1), generator=gen)
    x, y = x[:, :-1].contiguous(), x[:, 1:].contiguous()
    u = torch.rand(spec["batch"], cfg.control_dim, generator=gen) * 2 - 1
    training_step(model, x[:1, :8], y[:1, :8], u[:1], solver)
    model.zero_grad(set_to_none=True)
    gc.collect()
    baseline = _rss_bytes()
    resettable = _reset_peak_rss()
    before_peak = _hwm_bytes() if resettable else _maxrss_bytes()
    start = time.perf_counter()
    training_step(model, x, y, u, solver)
    elapsed = time.perf_counter() - start
    peak = _hwm_bytes() if resettable else _maxrss_bytes()
    return {
        "steps": spec["steps"],
        "adjoint": spec["adjoint"],
        "growth_bytes": max(peak - baseline, 0),
        "baseline_bytes": baseline,
        "method": "VmHWM after clear_refs" if resettable else "ru_maxrss",
        "step_s": elapsed,
        "peak_moved": peak > before_peak,
    }


def measure_training_memory(
    spec: dict,
    steps: int,
    adjoint: bool,
    batch: int = MEMORY_BATCH,
    tokens: int = MEMORY_TOKENS,
    timeout_s: float = 300,
) -> MemoryResult:
    """Peak memory growth of one hybrid training step, measured in a fresh subprocess (see the module doc)."""
    probe = {**spec, "steps": steps, "adjoint": adjoint, "batch": batch, "tokens": tokens}
    env = {
        **os.environ,
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    code = (
        "import json, sys; from steering.evaluation.efficiency import memory_probe; "
        "print(json.dumps(memory_probe(json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(probe)], capture_output=True, text=True, env=env, timeout=timeout_s
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory probe ({steps} steps, adjoint={adjoint}) failed:\n{done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out.pop("peak_moved"):
        raise RuntimeError(
            f"memory probe ({steps} steps, adjoint={adjoint}): the step never raised the peak RSS, "
            "so its growth cannot be told apart from the load; use a larger batch"
        )
    return MemoryResult(**out)


# ---------------------------------------------------------------- the 41-point NFE sweep


@dataclass
class SweepResult:
    seconds: float
    points: int
    total_nfe: int
    method: str  # "nfe_regimes" or "direct dopri5 solves"


def measure_regimes_sweep(model, tok=None, points: int = SWEEP_POINTS) -> SweepResult:
    """Time the NFE sweep over sentiment -2 ... +2 (style 0) at the sweep solver."""
    u_grid = torch.linspace(-2.0, 2.0, points)
    try:
        from ..analysis.regimes import nfe_regimes
    except ImportError:
        nfe_regimes = None
    if nfe_regimes is not None and tok is not None:
        result = nfe_regimes(model, tok, SWEEP_PROMPT, u_grid.tolist())
        total = int(sum(int(np.sum(per_u)) for per_u in result.nfe.values()))
        solvers = ", ".join(result.nfe)
        return SweepResult(float(result.seconds), points, total, f"nfe_regimes ({solvers}, as the regimes view)")
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(
        0, model.config.vocab_size, (1, min(SWEEP_PROMPT_TOKENS, model.config.block_size)), generator=gen
    )
    total = 0
    start = time.perf_counter()
    with torch.no_grad():
        h0 = model.encode(idx)
        for value in u_grid.tolist():
            total += model.middle(h0, torch.tensor([[value, 0.0]]), SWEEP_SOLVER).nfe
    return SweepResult(time.perf_counter() - start, points, total, "direct dopri5 solves")


# ---------------------------------------------------------------- models


def random_demo_models(config: dict = DEMO_CONFIG, seed: int = 0):
    """Randomly initialised demo-size hybrid and discrete models (eval mode).

    The hybrid's field gets the scale of a trained one (output weights std 0.05, α 0.5),
    so adaptive solvers have a non-trivial flow to follow; fixed-step costs do not
    depend on the weights.
    """
    torch.manual_seed(seed)
    hybrid = HybridODETransformer(ModelConfig(arch="hybrid", **config))
    torch.nn.init.normal_(hybrid.field.fc_out.weight, std=0.05)
    with torch.no_grad():
        hybrid.field.alpha.fill_(0.5)
    torch.manual_seed(seed)
    discrete = DiscreteTransformer(ModelConfig(arch="discrete", **config))
    return hybrid.eval(), discrete.eval()


def demo_tokenizer(vocab_size: int):
    from ..data import reviews as data
    from ..data.tokenizer import train_tokenizer

    return train_tokenizer([r.text for r in data.train_reviews()[::8]], vocab_size)
