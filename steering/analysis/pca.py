"""A fixed 3-D map of hidden-state space: PCA fitted once on reference paths, reused for any path.

The map is fitted on the mean-token state H̄(τ) of a reference prompt set, each prompt
solved for a grid of controls on one axis, every τ of every path pooled together. It is
stored as plain arrays (npz, loaded with allow_pickle=False) and a JSON description,
under a key made of the checkpoint's identity and the fitting settings, so a retrained
checkpoint or a changed setting never reuses a stale map.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..model.ode import SolverConfig
from .inputs import PATH_SOLVER, axis_control, prompt_tensor, solver_config, tau_grid, u_grid_array
from .trajectories import Trajectory, pooled

DEFAULT_PROMPTS = (
    "The movie was",
    "I thought the film",
    "This is one of the",
    "The acting in this movie",
    "The story",
    "Overall, the film is",
)
DEFAULT_U_VALUES = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)
PCA_FORMAT = 1


@dataclass
class ProjectedPath:
    name: str  # e.g. the prompt
    u: float  # control value on the map's axis (or the sentiment of a user's path)
    tau: np.ndarray  # [T]
    points: np.ndarray  # [T, n_components]
    stations: np.ndarray | None = None  # [S, n_components]: the solver's step ends on the path, when known


@dataclass
class PCAMap:
    components: np.ndarray  # [n_components, d]
    mean: np.ndarray  # [d]
    explained_variance_ratio: np.ndarray  # [n_components]
    reference: list[ProjectedPath]
    key: str
    axis: str = "sentiment"
    prompts: list[str] = field(default_factory=list)
    u_values: list[float] = field(default_factory=list)
    solver_label: str = ""

    def project(self, states) -> np.ndarray:
        """Coordinates of states [..., d] on the map: [..., n_components]."""
        states = np.asarray(states, dtype=np.float64)
        if states.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"states have width {states.shape[-1]}, the map was fitted on width {self.mean.shape[0]}")
        return (states - self.mean) @ self.components.T


def project_trajectory(pca_map: PCAMap, traj: Trajectory, name: str = "", axis: str | None = None) -> ProjectedPath:
    """A trajectory's mean-token path on the map, labelled by its control on the map's axis."""
    value = float(traj.u[0 if (axis or pca_map.axis) == "sentiment" else 1])
    return ProjectedPath(
        name=name or traj.solver_label,
        u=value,
        tau=np.asarray(traj.tau, dtype=float),
        points=pca_map.project(pooled(traj)),
    )


@torch.no_grad()
def reference_paths(
    model, tok, prompts: Sequence[str], u_values, solver: SolverConfig, axis: str, n_tau: int = 17
) -> list[tuple[str, float, np.ndarray, np.ndarray]]:
    """(prompt, u, τ, pooled states [T, d]) for every prompt and u; all u of a prompt in one batch.

    A batched fixed-step solve is exact per sample (each sample gets the same steps either
    way); an adaptive one is solved u by u so that each has its own step sizes.
    """
    grid = tau_grid(n_tau)
    out = []
    for prompt in prompts:
        idx, _ = prompt_tensor(model, tok, prompt)
        h0 = model.encode(idx)
        controls = torch.tensor([axis_control(u, axis) for u in u_values], device=idx.device)
        if solver.is_fixed:
            states = model.middle(h0.expand(len(u_values), -1, -1), controls, solver, tau=grid).states
            paths = states.mean(dim=2).transpose(0, 1)  # [n_u, T, d]
        else:
            paths = torch.stack(
                [model.middle(h0, c[None], solver, tau=grid).states[:, 0].mean(dim=1) for c in controls]
            )
        for u, path in zip(u_values, paths):
            out.append((prompt, float(u), grid.numpy().astype(float), path.cpu().numpy().astype(np.float64)))
    return out


def fit_pca_map(
    model,
    tok,
    prompts: Sequence[str] = DEFAULT_PROMPTS,
    u_values=DEFAULT_U_VALUES,
    solver=PATH_SOLVER,
    n_components: int = 3,
    axis: str = "sentiment",
    key: str = "",
    n_tau: int = 17,
) -> PCAMap:
    from sklearn.decomposition import PCA

    solver = solver_config(solver)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ValueError("give at least one reference prompt (text)")
    u_values = u_grid_array(u_values)
    axis_control(0.0, axis)
    paths = reference_paths(model, tok, prompts, u_values, solver, axis, n_tau)
    data = np.concatenate([p[3] for p in paths])
    if not 1 <= n_components <= min(data.shape):
        raise ValueError(f"n_components must be in [1, {min(data.shape)}], got {n_components}")
    pca = PCA(n_components=n_components).fit(data)
    pca_map = PCAMap(
        components=pca.components_.astype(np.float64),
        mean=pca.mean_.astype(np.float64),
        explained_variance_ratio=pca.explained_variance_ratio_.astype(np.float64),
        reference=[],
        key=key,
        axis=axis,
        prompts=list(prompts),
        u_values=[float(u) for u in u_values],
        solver_label=solver.label(),
    )
    pca_map.reference = [
        ProjectedPath(name=prompt, u=u, tau=tau, points=pca_map.project(states)) for prompt, u, tau, states in paths
    ]
    return pca_map


def checkpoint_identity(ckpt_dir: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of the checkpoint's weights file."""
    weights = Path(ckpt_dir) / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"checkpoint weights not found: {weights}")
    digest = hashlib.sha256()
    with weights.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def _settings_key(
    checkpoint_id: str, prompts, u_values, solver: SolverConfig, n_components: int, axis: str, n_tau: int
) -> str:
    settings = json.dumps(
        {
            "format": PCA_FORMAT,
            "checkpoint": checkpoint_id,
            "prompts": list(prompts),
            "u": [float(u) for u in u_values],
            "solver": solver.to_dict(),
            "n_components": n_components,
            "axis": axis,
            "n_tau": n_tau,
        },
        sort_keys=True,
    )
    return f"{checkpoint_id}-{hashlib.sha256(settings.encode()).hexdigest()[:12]}"


def save_pca_map(pca_map: PCAMap, cache_dir: str | Path) -> Path:
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    stem = cache / f"pca-{pca_map.key}"
    # written aside, then renamed: another process (a second lab server, a parallel test) never reads half a file
    part = cache / f".pca-{pca_map.key}.{os.getpid()}.part.npz"
    np.savez(
        part,
        components=pca_map.components,
        mean=pca_map.mean,
        explained_variance_ratio=pca_map.explained_variance_ratio,
        reference_points=np.stack([p.points for p in pca_map.reference]),
        reference_tau=np.stack([p.tau for p in pca_map.reference]),
    )
    meta = {
        "key": pca_map.key,
        "axis": pca_map.axis,
        "prompts": pca_map.prompts,
        "u_values": pca_map.u_values,
        "solver": pca_map.solver_label,
        "reference": [{"name": p.name, "u": p.u} for p in pca_map.reference],
    }
    part_meta = part.with_suffix(".json")
    part_meta.write_text(json.dumps(meta, indent=2))
    os.replace(part, stem.with_suffix(".npz"))
    os.replace(part_meta, stem.with_suffix(".json"))
    return stem.with_suffix(".npz")


def load_pca_map(cache_dir: str | Path, key: str) -> PCAMap | None:
    """The stored map for this key, or None when there is none or it cannot be read."""
    stem = Path(cache_dir) / f"pca-{key}"
    try:
        meta = json.loads(stem.with_suffix(".json").read_text())
        with np.load(stem.with_suffix(".npz"), allow_pickle=False) as arrays:
            arrays = {k: arrays[k] for k in arrays.files}
    except (OSError, ValueError, KeyError):
        return None
    if meta.get("key") != key or len(meta.get("reference", [])) != len(arrays["reference_points"]):
        return None
    reference = [
        ProjectedPath(name=r["name"], u=float(r["u"]), tau=tau, points=points)
        for r, tau, points in zip(meta["reference"], arrays["reference_tau"], arrays["reference_points"])
    ]
    return PCAMap(
        components=arrays["components"],
        mean=arrays["mean"],
        explained_variance_ratio=arrays["explained_variance_ratio"],
        reference=reference,
        key=key,
        axis=meta["axis"],
        prompts=meta["prompts"],
        u_values=meta["u_values"],
        solver_label=meta["solver"],
    )


def pca_map_for_checkpoint(
    model,
    tok,
    checkpoint_id: str,
    cache_dir: str | Path,
    prompts: Sequence[str] = DEFAULT_PROMPTS,
    u_values=DEFAULT_U_VALUES,
    solver=PATH_SOLVER,
    n_components: int = 3,
    axis: str = "sentiment",
    n_tau: int = 17,
) -> PCAMap:
    """The map for this checkpoint and these settings: loaded from cache_dir, else fitted and stored.

    checkpoint_id names the weights (use checkpoint_identity(ckpt_dir), a hash of the file).
    """
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise ValueError("checkpoint_id must be a non-empty string (e.g. checkpoint_identity(ckpt_dir))")
    solver = solver_config(solver)
    key = _settings_key(checkpoint_id, prompts, u_values, solver, n_components, axis, n_tau)
    cached = load_pca_map(cache_dir, key)
    if cached is not None:
        return cached
    pca_map = fit_pca_map(model, tok, prompts, u_values, solver, n_components, axis, key=key, n_tau=n_tau)
    save_pca_map(pca_map, cache_dir)
    return pca_map
