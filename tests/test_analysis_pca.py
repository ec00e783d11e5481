import json

import numpy as np
import pytest

from steering.analysis.pca import (
    checkpoint_identity,
    fit_pca_map,
    load_pca_map,
    pca_map_for_checkpoint,
    project_trajectory,
)
from steering.analysis.trajectories import compute_trajectory

PROMPTS = ["The movie was", "I hated the"]
U = [-2.0, -1.0, 0.0, 1.0, 2.0]


def test_paths_of_one_prompt_start_at_one_point_and_then_part(small_hybrid, small_tokenizer):
    pca_map = fit_pca_map(small_hybrid, small_tokenizer, PROMPTS, U)
    assert len(pca_map.reference) == len(PROMPTS) * len(U)
    first = [p for p in pca_map.reference if p.name == PROMPTS[0]]
    starts = np.array([p.points[0] for p in first])
    ends = np.array([p.points[-1] for p in first])
    assert np.abs(starts - starts[0]).max() < 1e-9  # u enters only after τ = 0
    assert np.abs(ends - ends[0]).max() > 1e-3  # ... and then moves the paths apart
    ratio = pca_map.explained_variance_ratio
    assert ratio.shape == (3,) and np.all(np.diff(ratio) <= 0) and 0 < ratio.sum() <= 1 + 1e-9


def test_project_is_the_fitted_linear_map(small_hybrid, small_tokenizer):
    pca_map = fit_pca_map(small_hybrid, small_tokenizer, PROMPTS, U)
    traj = compute_trajectory(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], n_tau=9)
    path = project_trajectory(pca_map, traj, "mine")
    assert path.points.shape == (9, 3) and path.u == 1.0
    # a single state, a batch of them, and the orthonormal components
    assert np.allclose(pca_map.project(traj.states[0, 0]), pca_map.project(traj.states[0])[0])
    assert np.allclose(pca_map.components @ pca_map.components.T, np.eye(3), atol=1e-8)
    with pytest.raises(ValueError, match="width"):
        pca_map.project(np.zeros((4, 7)))


def test_cache_roundtrip_is_keyed_and_pickle_free(small_hybrid, small_tokenizer, small_checkpoint, tmp_path):
    tmp_path = tmp_path / "cache"
    ident = checkpoint_identity(small_checkpoint)
    assert len(ident) == 16
    first = pca_map_for_checkpoint(small_hybrid, small_tokenizer, ident, tmp_path, PROMPTS, U)
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".json", ".npz"]
    json.loads(next(tmp_path.glob("*.json")).read_text())
    with np.load(next(tmp_path.glob("*.npz")), allow_pickle=False) as arrays:
        assert "components" in arrays.files
    again = load_pca_map(tmp_path, first.key)
    assert again is not None and np.array_equal(again.components, first.components)
    assert [p.u for p in again.reference] == [p.u for p in first.reference]
    cached = pca_map_for_checkpoint(small_hybrid, small_tokenizer, ident, tmp_path, PROMPTS, U)
    assert cached.key == first.key and np.array_equal(cached.reference[3].points, first.reference[3].points)
    other = pca_map_for_checkpoint(small_hybrid, small_tokenizer, "another-checkpoint", tmp_path, PROMPTS, U)
    assert other.key != first.key and len(list(tmp_path.glob("*.npz"))) == 2


def test_pca_bad_inputs(small_hybrid, small_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="prompt"):
        fit_pca_map(small_hybrid, small_tokenizer, [], U)
    with pytest.raises(ValueError, match="empty"):
        fit_pca_map(small_hybrid, small_tokenizer, PROMPTS, [])
    with pytest.raises(ValueError, match="axis"):
        fit_pca_map(small_hybrid, small_tokenizer, PROMPTS, U, axis="mood")
    with pytest.raises(ValueError, match="checkpoint_id"):
        pca_map_for_checkpoint(small_hybrid, small_tokenizer, "", tmp_path)
