"""Sampling from either model, with a KV cache for the discrete blocks.

With the cache only the newest token's state is integrated through the ODE block. A
per-token field needs nothing else; a token-mixing field keeps its keys and values for
each field evaluation, which is exact for fixed-step solvers only, so with an adaptive
solver it integrates the whole sequence at every step instead. For fixed-step solvers
cached and uncached sampling give the same tokens; an adaptive solver picks its steps
from the error of everything it integrates at once, so with a per-token field the two
may differ there in the last digits.

Fixed-step solvers (and the discrete model) decode on the fast path of steering/inference/decode.py
by default: the same tokens from fewer, fused ops on a static cache. fast=False keeps the
general path below (the reference the fast one is tested and benchmarked against).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..data.tokenizer import bos_id, decode, encode
from ..model.ode import TRAINING_SOLVER, SolverConfig, validate_control
from .decode import can_decode_fast, fast_sample_tokens
from .sampling import DEFAULT_SAMPLING, Sampling, next_tokens


@dataclass
class Generation:
    text: str  # prompt + continuation
    prompt: str
    continuation: str
    sentiment: float
    style: float
    nfe: int  # field evaluations summed over all decoding steps
    tokens: list[int] = field(default_factory=list)
    notice: str = ""  # e.g. that a long prompt was cut to its tail

    def to_dict(self) -> dict:
        """Without the control: its entries are named by the checkpoint's axes (`generate --json` adds "control")."""
        return {
            "text": self.text,
            "prompt": self.prompt,
            "continuation": self.continuation,
            "nfe": self.nfe,
            "notice": self.notice,
        }


def prompt_ids(tok, prompt: str, block_size: int, max_new_tokens: int) -> tuple[list[int], str]:
    """BOS + the prompt's tokens, cut to its tail so that prompt + new tokens fit the context."""
    ids = [bos_id(tok)] + encode(tok, prompt)
    room = block_size - max_new_tokens
    if len(ids) > room:
        kept = ids[len(ids) - room :]
        return (
            kept,
            f"The prompt is {len(ids) - 1} tokens; only its last {len(kept)} fit the context with "
            f"{max_new_tokens} new tokens, so the start was dropped.",
        )
    return ids, ""


def check_sampling_args(max_new_tokens: int, block_size: int):
    if not 1 <= max_new_tokens < block_size:
        raise ValueError(f"max_new_tokens must be in [1, {block_size - 1}], got {max_new_tokens}")


@torch.inference_mode()  # lighter than no_grad per op; decoding one token at a time is overhead-bound
def sample_tokens(
    model,
    ids: list[int],
    u: torch.Tensor,
    max_new_tokens: int,
    *,
    n: int = 1,
    sampling: Sampling = DEFAULT_SAMPLING,
    seed: int = 0,
    solver: SolverConfig | None = None,
    use_cache: bool = True,
    fast: bool = True,
) -> tuple[torch.Tensor, int]:
    """n continuations of one prompt: (new token ids [n, max_new_tokens], total NFE).

    fast: decode on steering/inference/decode.py's fast path where it applies (with the cache, a fixed-step
    solver or the discrete model); the tokens are the same either way. solver: default the model's own
    training solver (a discrete model has none and needs none)."""
    if solver is None:
        solver = getattr(model, "training_solver", TRAINING_SOLVER)
    if fast and use_cache:
        if can_decode_fast(model, solver):
            return fast_sample_tokens(model, ids, u, max_new_tokens, n=n, sampling=sampling, seed=seed, solver=solver)
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.tensor([ids] * n, dtype=torch.long, device=device)
    u = u.to(device).expand(n, -1)
    use_cache = use_cache and model.can_cache(solver)
    caches = model.new_caches() if use_cache else None
    nfe, new = 0, []
    step_input, start = x, 0
    for _ in range(max_new_tokens):
        if use_cache:
            h0 = model.encode(step_input, caches, start)
            mid = model.middle(h0, u, solver, caches=caches)
            logits = model.decode(mid.final, caches)[:, -1]
            start += step_input.shape[1]
        else:
            h0 = model.encode(x)
            mid = model.middle(h0, u, solver)
            logits = model.decode(mid.final)[:, -1]
        nfe += mid.nfe
        nxt = next_tokens(logits, x, sampling, gen)
        new.append(nxt)
        x = torch.cat([x, nxt], dim=1)
        step_input = nxt
    return torch.cat(new, dim=1), nfe


def generate(
    model,
    tok,
    prompt: str,
    sentiment: float = 0.0,
    style: float = 0.0,
    *,
    n: int = 1,
    max_new_tokens: int = 40,
    sampling: Sampling = DEFAULT_SAMPLING,
    seed: int = 0,
    solver: SolverConfig | None = None,
    use_cache: bool = True,
    fast: bool = True,
    **sampling_overrides,
) -> list[Generation]:
    """Steered continuations of a prompt (any text; an empty prompt starts from BOS).

    sampling_overrides (temperature=..., top_k=..., ...) replace fields of `sampling`."""
    if not isinstance(prompt, str):
        raise ValueError("prompt must be text")
    sampling = replace(sampling, **sampling_overrides) if sampling_overrides else sampling
    block_size = model.config.block_size
    check_sampling_args(max_new_tokens, block_size)
    u = validate_control([sentiment, style])
    ids, notice = prompt_ids(tok, prompt, block_size, max_new_tokens)
    new, nfe = sample_tokens(
        model, ids, u, max_new_tokens, n=n, sampling=sampling, seed=seed, solver=solver, use_cache=use_cache, fast=fast
    )
    shown_prompt = decode(tok, ids)
    results = []
    for row in new.tolist():
        continuation = decode(tok, row)
        results.append(
            Generation(
                text=shown_prompt + continuation,
                prompt=prompt,
                continuation=continuation,
                sentiment=float(sentiment),
                style=float(style),
                nfe=nfe,
                tokens=row,
                notice=notice,
            )
        )
    return results
