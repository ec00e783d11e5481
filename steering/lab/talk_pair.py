"""The talk kit's second model: `export-talk --compare-with B` carries B's continuations beside A's in the offline
page (the same prompts, seed and grid of controls; each model's first axis on the slider), and `figures --only
compare --compare-with B` exports the comparison slide (steering/figures/compare.py's compare_slide_figure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from . import logic


def pair_grid(
    checkpoint: str | Path,
    prompts: Sequence[str],
    *,
    seed: int,
    max_new_tokens: int,
    on_progress: Callable[[str], None] | None = None,
) -> dict:
    """Model B's text at every grid control of every prompt, as the page shows it: {checkpoint, axes, prompts:
    [{shown, points: [style][sentiment] -> {text, verdict, score, nfe}}]} (plain JSON)."""
    from ..analysis.pca import checkpoint_identity, pca_map_for_checkpoint
    from ..training.checkpoint import load_checkpoint
    from .talk import steer_grid

    model, tok, config = load_checkpoint(checkpoint)
    if not hasattr(model, "field"):
        raise ValueError(f"{checkpoint} holds a discrete model: it takes no control, so it has no slider to share")
    texts = logic.model_texts(config)
    extra = {"prompts": texts.prompts[:5]} if texts.user_model else {}
    pca_map = pca_map_for_checkpoint(model, tok, checkpoint_identity(checkpoint), logic.cache_dir() / "pca", **extra)
    axis_judge = ends = None
    if texts.user_model:
        from ..judges.axis_judges import load_axis_judges

        axis_judge, ends = load_axis_judges(checkpoint)[0], texts.ends[0]
    out = []
    for prompt in prompts:
        if on_progress is not None:
            on_progress(f"{prompt!r}: the second model ({checkpoint}) at every grid control")
        views, points = steer_grid(
            model, tok, pca_map, prompt, seed=seed, max_new_tokens=max_new_tokens, axis_judge=axis_judge, ends=ends
        )
        out.append(
            {
                "shown": views[0].prompt_shown,
                "points": [
                    [{"text": p.continuation, "verdict": p.verdict, "score": p.score, "nfe": p.solve_nfe} for p in row]
                    for row in points
                ],
            }
        )
    return {
        "checkpoint": str(checkpoint),
        "axes": list(texts.names),
        "scoreLabel": texts.ends[0][1] if texts.user_model else "positive",
        "prompts": out,
    }
