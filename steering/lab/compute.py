"""What the lab's pages compute through the model, without Streamlit: the Steer page's views (one control, or
many at once through the fast decoder, as the work-ahead asks), the judges' verdicts on their text, and the
regimes sweep in chunks for a progress bar. Plain data out (SteerView, Judgement, Regimes)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model.ode import SolverConfig


# ---------------------------------------------------------------- the Steer page's computation
@dataclass
class SteerView:
    """Everything on the Steer page that depends on u, as plain data."""

    prompt_shown: str  # the prompt as the model saw it (its tail if it was cut)
    continuation: str
    generation_notice: str
    generation_nfe: int  # field evaluations over all decoding steps
    next_tokens: list[str]
    next_probs: list[float]
    tau: list[float]
    path: list[list[float]]  # mean-token H(τ) in the PCA map, [T, n_components]
    solve_nfe: int  # field evaluations of one solve of the prompt
    eval_taus: list[float]
    solver_label: str
    judgement: Judgement | None = None  # attached by attach_judgements (the page judges otherwise)
    stations: list[list[float]] = field(default_factory=list)  # the solver's step ends on the map [S, n_components]


def compute_steer_view(
    model,
    tok,
    pca_map,
    prompt: str,
    control: tuple[float, float],
    solver: SolverConfig,
    *,
    seed: int = 0,
    max_new_tokens: int = 24,
    temperature: float | None = None,  # None: the sampler's default (sampling.DEFAULT_SAMPLING)
    top_k: int = 10,
    n_tau: int = 33,
    cancelled=None,
) -> SteerView:
    """Continuation (fixed seed, so only u changes it), next-token top-k, the path in the map, NFE.

    Fixed-step solvers go through compute_steer_views (the fast decoder; the next-token odds come
    from the generation's own prompt pass; cancelled() is polled between tokens, as there);
    adaptive ones through the general functions below."""
    from ..inference.decode import can_decode_fast

    if can_decode_fast(model, solver):
        return compute_steer_views(
            model,
            tok,
            pca_map,
            prompt,
            [control],
            solver,
            seed=seed,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            n_tau=n_tau,
            cancelled=cancelled,
        )[0]
    from ..analysis.pca import project_trajectory
    from ..analysis.sweep import next_token_distribution
    from ..analysis.trajectories import compute_path
    from ..inference.generate import generate

    max_new_tokens = max(1, min(max_new_tokens, model.config.block_size - 1))
    gen = generate(
        model,
        tok,
        prompt,
        control[0],
        control[1],
        max_new_tokens=max_new_tokens,
        **({} if temperature is None else {"temperature": temperature}),
        seed=seed,
        solver=solver,
    )[0]
    tokens, probs = next_token_distribution(model, tok, prompt, list(control), solver, top_k=top_k)
    traj = compute_path(model, tok, prompt, list(control), solver, n_tau=n_tau, line="solver")
    path = project_trajectory(pca_map, traj).points
    stations = pca_map.project(traj.stations.mean(axis=1))
    return SteerView(
        prompt_shown=gen.text[: len(gen.text) - len(gen.continuation)],
        continuation=gen.continuation,
        generation_notice=gen.notice,
        generation_nfe=int(gen.nfe),
        next_tokens=list(tokens),
        next_probs=[float(p) for p in probs],
        tau=[float(t) for t in traj.tau],
        path=np.asarray(path, dtype=float).tolist(),
        solve_nfe=int(traj.nfe),
        eval_taus=[float(t) for t in traj.eval_taus],
        solver_label=traj.solver_label,
        stations=np.asarray(stations, dtype=float).tolist(),
    )


def compute_steer_views(
    model,
    tok,
    pca_map,
    prompt: str,
    controls: list[tuple[float, float]],
    solver: SolverConfig,
    *,
    seed: int = 0,
    max_new_tokens: int = 24,
    temperature: float | None = None,  # None: the sampler's default (sampling.DEFAULT_SAMPLING)
    top_k: int = 10,
    n_tau: int = 33,
    cancelled=None,
) -> list[SteerView]:
    """compute_steer_view for several controls of one prompt at once: one batched decode, one batched solve.

    Each row samples from its own generator seeded with `seed`, so a row gives the tokens a call for
    that control alone gives (batched products round differently in the last bits, which can flip a
    token only where two are tied to float precision). cancelled() is polled between tokens and
    stages; when it returns True the computation stops with sampling.Cancelled. Adaptive solvers
    (no fast decoder) are computed one control at a time.
    """
    from dataclasses import replace as _replace

    import torch

    from ..analysis.inputs import prompt_tensor, tau_grid
    from ..analysis.trajectories import hermite_line, recorded_stations_and_slopes, solve_with_slopes
    from ..data.tokenizer import decode
    from ..inference.decode import STAGES, can_decode_fast, fast_sample_tokens, stage_taus
    from ..inference.generate import check_sampling_args, prompt_ids
    from ..inference.sampling import DEFAULT_SAMPLING, Cancelled
    from ..model.ode import validate_control

    if not can_decode_fast(model, solver):
        return [
            compute_steer_view(
                model,
                tok,
                pca_map,
                prompt,
                c,
                solver,
                seed=seed,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                n_tau=n_tau,
            )
            for c in controls
        ]
    if not isinstance(prompt, str):
        raise ValueError("prompt must be text")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    if not controls:
        return []
    block_size = model.config.block_size
    max_new_tokens = max(1, min(max_new_tokens, block_size - 1))
    check_sampling_args(max_new_tokens, block_size)
    u = validate_control([list(c) for c in controls])
    rows = len(controls)
    sampling = DEFAULT_SAMPLING if temperature is None else _replace(DEFAULT_SAMPLING, temperature=temperature)
    ids, notice = prompt_ids(tok, prompt, block_size, max_new_tokens)
    model_field = hasattr(model, "field")
    first_logits, prompt_path = [], ([] if model_field else None)
    new, nfe = fast_sample_tokens(
        model,
        ids,
        u,
        max_new_tokens,
        n=rows,
        sampling=sampling,
        solver=solver,
        gens=[torch.Generator(device="cpu").manual_seed(seed) for _ in range(rows)],
        cancelled=cancelled,
        on_prompt=first_logits.append,
        prompt_path=prompt_path,
    )
    if cancelled is not None and cancelled():
        raise Cancelled()
    idx, _ = prompt_tensor(model, tok, prompt)
    same_prompt = idx[0].tolist() == ids
    with torch.inference_mode():
        if same_prompt:  # the generation's prompt pass gave the next-token logits already
            logits = first_logits[0]
        else:  # a prompt cut differently for generation: one more pass
            from ..analysis.inputs import decode_last

            h0 = model.encode(idx).expand(rows, -1, -1)
            logits = decode_last(model, model.middle(h0, u, solver).final)
        top = torch.topk(logits.float().softmax(-1), min(top_k, logits.shape[-1]))
        # the path: every control's solve of the prompt, at the solver's own step ends, and the solver's dense
        # output between them (compute_path's line="solver"). The generation's prompt pass is that solve, with
        # the slopes at its step starts; a reference solve per slider position (the Trajectories page's line)
        # cost 0.27 of the whole range, a solve of its own 0.08
        if model_field and same_prompt:
            stations, slopes = recorded_stations_and_slopes(model, prompt_path, u.to(logits.device))
            solve_nfe = STAGES[solver.method] * solver.steps
            eval_taus = [float(t) for t in stage_taus(solver.method, solver.steps)]
        elif model_field:
            h0 = model.encode(idx).expand(rows, -1, -1)
            solve, slopes = solve_with_slopes(model, h0, u.to(h0.device), solver)
            stations, solve_nfe, eval_taus = solve.states, solve.nfe, solve.eval_taus
        else:  # a discrete model: its block outputs are the stations and the path
            h0 = model.encode(idx).expand(rows, -1, -1)
            solve = model.middle(h0, u.to(h0.device), solver, tau=tau_grid(n_tau))
            stations, solve_nfe, eval_taus = solve.states, solve.nfe, solve.eval_taus
        # the map draws the mean token's path: pooled before the cubic (linear in its nodes and slopes), so it
        # interpolates [rows, d] rather than every token's state
        at_stations = stations.mean(dim=2)  # [S, rows, d]
        line = hermite_line(at_stations, slopes.mean(dim=2), n_tau) if model_field else at_stations
    line_tau = tau_grid(n_tau)
    states = line.float().cpu().numpy()  # [T, rows, d]
    at_stations = at_stations.float().cpu().numpy()
    shown = decode(tok, ids)
    label = solver.label() if model_field else f"{len(eval_taus)} discrete blocks"
    views = []
    for r in range(rows):
        path = pca_map.project(states[:, r])
        views.append(
            SteerView(
                prompt_shown=shown,
                continuation=decode(tok, new[r].tolist()),
                generation_notice=notice,
                generation_nfe=int(nfe),
                next_tokens=[decode(tok, [i]) for i in top.indices[r].tolist()],
                next_probs=[float(p) for p in top.values[r].tolist()],
                tau=[float(t) for t in line_tau.tolist()],
                path=np.asarray(path, dtype=float).tolist(),
                solve_nfe=int(solve_nfe),
                eval_taus=[float(t) for t in eval_taus],
                solver_label=label,
                stations=np.asarray(pca_map.project(at_stations[:, r]), dtype=float).tolist(),
            )
        )
    return views


def attach_judgements(views: list[SteerView], axis_judge=None) -> list[SteerView]:
    """Each view with its text judged (one batched call of each judge); returns the views.
    axis_judge: a user model's first-axis judge (user_data), in place of the sentiment classifier."""
    from ..judges import judge

    if not views:
        return views
    texts = [v.prompt_shown + v.continuation for v in views]
    compound = judge.vader_compound(texts)
    if axis_judge is not None:
        probability = axis_judge.probability(texts)
    else:
        probability = judge.sentiment_judge().probability(texts) if judge_available() else None
    for k, view in enumerate(views):
        view.judgement = Judgement(
            classifier_positive=None if probability is None else float(probability[k]),
            vader_compound=float(compound[k]),
        )
    return views


@dataclass
class Judgement:
    classifier_positive: float | None  # the trained judge's P(positive); None when its files are absent
    vader_compound: float  # VADER's compound score in [-1, 1]

    @property
    def score(self) -> float:
        """P(positive) from the classifier, else VADER's compound mapped onto [0, 1]."""
        if self.classifier_positive is not None:
            return self.classifier_positive
        return (self.vader_compound + 1.0) / 2.0


def judge_available() -> bool:
    """Whether the trained judge's files exist (judging must never start a minute-long build in a page)."""
    import os
    from pathlib import Path

    from ..judges import judge

    override = os.environ.get("STEERING_JUDGE_DIR")
    candidates = [Path(override)] if override else [judge.SHIPPED_DIR, judge.CACHE_DIR]
    names = [f"{n}.{ext}" for n in judge.SPECS for ext in ("json", "safetensors")]
    return any(all((folder / name).is_file() for name in names) for folder in candidates)


def judge_text(text: str, axis_judge=None) -> Judgement:
    from ..judges import judge

    compound = float(judge.vader_compound([text])[0])
    if axis_judge is not None:
        probability = float(axis_judge.probability([text])[0])
    else:
        probability = float(judge.sentiment_judge().probability([text])[0]) if judge_available() else None
    return Judgement(classifier_positive=probability, vader_compound=compound)


# ---------------------------------------------------------------- regimes in chunks, for a progress bar
def regimes_in_chunks(
    model,
    tok,
    prompt: str,
    u_grid,
    *,
    solvers=("dopri5", "adaptive_heun"),
    rtol: float = 1e-3,
    atol: float = 1e-4,
    targets=(" good", " bad"),
    chunks: int = 8,
    on_progress=None,
    precision: str | None = "float64",
):
    """steering.analysis.regimes.nfe_regimes over slices of the u grid, merged into one Regimes (precision: the
    sweep's, batched on a copy of the field; None for one torchdiffeq solve per u in the model's own dtype).

    Every u is its own solve either way, so the merged NFE equal one whole sweep's; the
    switches, the crossover and the disagreements are recomputed on the merged arrays with the
    analysis module's own function. on_progress(done_fraction) is called after each slice.
    """
    from ..analysis.regimes import nfe_regimes, profile_summary

    grid = np.asarray(u_grid, dtype=float)
    if grid.size == 0:
        raise ValueError("the u grid is empty; give at least one control value")
    parts = []
    for k, piece in enumerate(np.array_split(grid, max(1, min(chunks, grid.size)))):
        parts.append(
            nfe_regimes(
                model, tok, prompt, piece, solvers=solvers, rtol=rtol, atol=atol, targets=targets, precision=precision
            )
        )
        if on_progress is not None:
            on_progress((k + 1) / max(1, min(chunks, grid.size)))
    first = parts[0]
    methods = list(first.nfe)
    nfe = {m: np.concatenate([p.nfe[m] for p in parts]) for m in methods}
    steps = {m: np.concatenate([p.steps[m] for p in parts]) for m in methods}
    relative = np.concatenate([p.target_probability for p in parts])
    return replace(
        first,
        u=grid,
        nfe=nfe,
        steps=steps,
        **profile_summary(grid, nfe, steps, relative),
        target_probability=relative,
        target_raw=np.concatenate([p.target_raw for p in parts]),
        seconds=float(sum(p.seconds for p in parts)),
        max_tau=max(p.max_tau for p in parts),
    )


# ---------------------------------------------------------------- the PCA map every view draws on
def lab_pca_map(model, tok, config: dict | None, checkpoint_id: str):
    """The checkpoint's PCA map as the lab draws it (pages, talk kit, steering.load()): fitted once on the
    reference prompts (a model of one's own: five openings of its held-out text, the shipped kind's prompts mean
    nothing to it) and kept under logic.cache_dir(), keyed by the weights, so every caller shares one map."""
    from ..analysis.pca import pca_map_for_checkpoint
    from .logic import cache_dir, model_texts

    texts = model_texts(config)
    extra = {"prompts": texts.prompts[:5]} if texts.user_model else {}
    return pca_map_for_checkpoint(model, tok, checkpoint_id, cache_dir() / "pca", **extra)
