"""The paper's alignment claim over many prompts: does a prompt's semantic crossover sit on one of its NFE switches?

For each prompt: the switches of dopri5's NFE against u (every one, steering.analysis.changepoints),
the crossover (where P(t0) / (P(t0) + P(t1)) crosses 50 %), and the distance from the crossover
to the nearest switch. A prompt is aligned when that distance is at most `threshold` (0.1 by
default: one step of the default 41-point grid on [-2, 2]).

Against chance, two nulls:
  shuffled u   each prompt's crossover moved to a u drawn uniformly from the swept range, its
               own switches kept (`draws` times, seeded): the distance a random crossover would
               have. p-values: the share of draws at least as aligned as observed (+1 smoothing).
  swapped      each prompt's crossover against every other prompt's switches: is a crossover
               closer to its own switches than to another prompt's (both may cluster near 0)?
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .changepoints import Switch
from .inputs import u_grid_array
from .regimes import ALIGNED_WITHIN, DEFAULT_U_GRID, nfe_regimes

NULL_DRAWS = 2000
TOLERANCE = 1e-9  # a distance of 0.1 computed as 0.1000000000001 is still within 0.1


@dataclass
class PromptRegimes:
    prompt: str
    switches: list[Switch]
    crossover_u: float | None
    distance: float | None  # crossover to its nearest switch (None: no crossover or no switch)
    aligned: bool
    nfe: np.ndarray  # [n_u] the first solver's NFE
    nfe_disagreement: float
    step_disagreement: float
    reading: str
    max_tau: float = 1.0  # the furthest τ any of this prompt's solves evaluated the field at

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "switches": [s.to_dict() for s in self.switches],
            "crossover_u": self.crossover_u,
            "distance": self.distance,
            "aligned": self.aligned,
            "nfe": self.nfe,
            "nfe_disagreement": self.nfe_disagreement,
            "step_disagreement": self.step_disagreement,
            "reading": self.reading,
            "max_tau": self.max_tau,
        }


@dataclass
class Alignment:
    u: np.ndarray
    prompts: list[PromptRegimes]
    stats: dict  # alignment_statistics(...)
    solver: str
    rtol: float
    atol: float
    seconds: float
    prompt_set: str = ""

    def to_dict(self) -> dict:
        return {
            "prompt_set": self.prompt_set,
            "u": self.u,
            "solver": self.solver,
            "rtol": self.rtol,
            "atol": self.atol,
            **self.stats,
            "prompts": [p.to_dict() for p in self.prompts],
            # every solve of every prompt: 1 means each landed on τ = 1 (a depth field is defined on [0, 1] only)
            "max_tau": max(p.max_tau for p in self.prompts),
            "seconds": self.seconds,
        }


def nearest_distance(at: float | None, switch_us) -> float | None:
    switch_us = list(switch_us)
    if at is None or not switch_us:
        return None
    return float(min(abs(at - s) for s in switch_us))


def _share(distances, threshold: float) -> float:
    """Share of distances within threshold; None (no switch) counts as not aligned."""
    return float(np.mean([d is not None and d <= threshold + TOLERANCE for d in distances]))


def _median(distances) -> float | None:
    finite = [d for d in distances if d is not None]
    return float(np.median(finite)) if finite else None


def alignment_statistics(
    crossovers, switch_sets, u_range, threshold: float = ALIGNED_WITHIN, draws: int = NULL_DRAWS, seed: int = 0
) -> dict:
    """aligned_share, median_distance and both nulls, from each prompt's crossover and switch u's.

    crossovers: one u or None per prompt; switch_sets: one list of switch u's per prompt;
    u_range: (low, high) of the sweep, where the shuffled-u null draws its crossovers.
    Prompts without a crossover are left out (there is nothing to align); a prompt with a
    crossover but no switch counts as not aligned and has no distance.
    """
    crossovers = list(crossovers)
    switch_sets = [[float(s) for s in ss] for ss in switch_sets]
    if len(crossovers) != len(switch_sets):
        raise ValueError(f"{len(crossovers)} crossovers but {len(switch_sets)} switch lists")
    low, high = float(u_range[0]), float(u_range[1])
    if not high >= low:
        raise ValueError("u_range must be (low, high) with high >= low")
    if threshold < 0 or draws < 1:
        raise ValueError("threshold must be >= 0 and draws >= 1")
    kept = [i for i, c in enumerate(crossovers) if c is not None]
    observed = [nearest_distance(crossovers[i], switch_sets[i]) for i in kept]
    stats = {
        "threshold": float(threshold),
        "n_prompts": len(crossovers),
        "n_with_crossover": len(kept),
        "n_with_switches": sum(bool(ss) for ss in switch_sets),
        "n_measured": sum(d is not None for d in observed),
        "null_draws": int(draws),
        "null_seed": int(seed),
    }
    if not kept:
        return {
            **stats,
            "aligned_share": None,
            "median_distance": None,
            "null_aligned_share": None,
            "null_median_distance": None,
            "p_aligned_share": None,
            "p_median_distance": None,
            "swapped_aligned_share": None,
            "swapped_median_distance": None,
        }
    aligned_share, median_distance = _share(observed, threshold), _median(observed)

    rng = np.random.default_rng(seed)
    random_u = rng.uniform(low, high, size=(draws, len(kept)))
    null = np.full((draws, len(kept)), np.inf)
    for j, i in enumerate(kept):
        if switch_sets[i]:
            null[:, j] = np.abs(random_u[:, j, None] - np.asarray(switch_sets[i])[None, :]).min(axis=1)
    null_shares = (null <= threshold + TOLERANCE).mean(axis=1)
    with np.errstate(invalid="ignore"):
        masked = np.where(np.isfinite(null), null, np.nan)
        null_medians = np.nanmedian(masked, axis=1) if np.isfinite(null).any() else np.full(draws, np.nan)
    p_share = float((1 + (null_shares >= aligned_share - TOLERANCE).sum()) / (1 + draws))
    p_median = (
        None
        if median_distance is None
        else float((1 + (null_medians <= median_distance + TOLERANCE).sum()) / (1 + draws))
    )

    swapped = [nearest_distance(crossovers[i], switch_sets[j]) for i in kept for j in range(len(crossovers)) if j != i]
    return {
        **stats,
        "aligned_share": aligned_share,
        "median_distance": median_distance,
        "null_aligned_share": float(null_shares.mean()),
        "null_median_distance": float(np.nanmedian(null_medians)) if np.isfinite(null_medians).any() else None,
        "p_aligned_share": p_share,
        "p_median_distance": p_median,
        "swapped_aligned_share": _share(swapped, threshold) if swapped else None,
        "swapped_median_distance": _median(swapped),
    }


def regimes_over_prompts(
    model,
    tok,
    prompts,
    u_grid=DEFAULT_U_GRID,
    solvers=("dopri5", "adaptive_heun"),
    rtol: float = 1e-3,
    atol: float = 1e-4,
    axis: str = "sentiment",
    targets=(" good", " bad"),
    max_steps: int = 2000,
    threshold: float = ALIGNED_WITHIN,
    draws: int = NULL_DRAWS,
    seed: int = 0,
    prompt_set: str = "",
    on_progress=None,
    precision: str | None = None,
) -> Alignment:
    """nfe_regimes for each prompt, then the alignment statistics over them.

    on_progress(done_fraction) is called after each prompt. precision: as nfe_regimes's (None: one torchdiffeq
    solve per u in the model's dtype; "float64": every u of a prompt in one batch, about 10x faster).
    """
    prompts = list(prompts)
    if not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError("give at least one prompt (non-empty text)")
    grid = u_grid_array(u_grid)
    start = time.perf_counter()
    rows = []
    for k, prompt in enumerate(prompts):
        r = nfe_regimes(
            model,
            tok,
            prompt,
            grid,
            solvers=solvers,
            rtol=rtol,
            atol=atol,
            axis=axis,
            targets=targets,
            max_steps=max_steps,
            precision=precision,
        )
        distance = nearest_distance(r.crossover_u, [s.u for s in r.switches])
        rows.append(
            PromptRegimes(
                prompt=prompt,
                switches=r.switches,
                crossover_u=r.crossover_u,
                distance=distance,
                aligned=distance is not None and distance <= threshold + TOLERANCE,
                nfe=r.nfe[solvers[0]],
                nfe_disagreement=r.nfe_disagreement,
                step_disagreement=r.step_disagreement,
                reading=r.reading,
                max_tau=r.max_tau,
            )
        )
        if on_progress is not None:
            on_progress((k + 1) / len(prompts))
    stats = alignment_statistics(
        [r.crossover_u for r in rows],
        [[s.u for s in r.switches] for r in rows],
        (grid[0], grid[-1]),
        threshold,
        draws,
        seed,
    )
    return Alignment(
        u=grid,
        prompts=rows,
        stats=stats,
        solver=solvers[0],
        rtol=float(rtol),
        atol=float(atol),
        seconds=time.perf_counter() - start,
        prompt_set=prompt_set,
    )
