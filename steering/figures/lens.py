"""Depth lens pictures: the next-token distribution read out at each τ."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def visible(token: str) -> str:
    """A token with its spaces and newlines shown, so ' the' and 'the' differ on an axis."""
    return token.replace(" ", "␣").replace("\n", "⏎") or "∅"


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def depth_lens_heatmap(
    lens, title: str = "Depth lens: next-token probability if integration stopped at τ"
) -> go.Figure:
    """Rows: every token that is in the top k at some τ; columns: τ; colour: its probability."""
    probs = np.asarray(lens.shown_probs, dtype=float)  # [T, n_shown]
    tokens = _unique([visible(t) for t in lens.shown_tokens])
    tau = np.asarray(lens.tau, dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=probs.T,
            x=tau,
            y=tokens,
            colorscale="Viridis",
            zmin=0,
            colorbar=dict(title="probability"),
            hovertemplate="τ=%{x:.3f}<br>%{y}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(title=title, xaxis_title="depth τ", yaxis_title="next token", yaxis=dict(autorange="reversed"))
    return fig


def depth_lens_positions_heatmap(lens, title: str = "Depth lens over the prompt: most likely next token") -> go.Figure:
    """Rows: prompt positions; columns: τ; colour: the top probability, text: the top token."""
    if lens.position_top_probs is None:
        raise ValueError("this lens was computed for the last position only (use all_positions=True)")
    probs = np.asarray(lens.position_top_probs, dtype=float)  # [T, tokens]
    tokens = [[visible(t) for t in row] for row in lens.position_top_tokens]
    rows = _unique([visible(t) for t in lens.token_strings])
    tau = np.asarray(lens.tau, dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=probs.T,
            x=tau,
            y=rows,
            text=np.array(tokens).T,
            texttemplate="%{text}",
            colorscale="Blues",
            zmin=0,
            zmax=1,
            colorbar=dict(title="top probability"),
            hovertemplate="after %{y} at τ=%{x:.3f}: %{text} (%{z:.3f})<extra></extra>",
        )
    )
    fig.update_layout(
        title=title, xaxis_title="depth τ", yaxis_title="prompt position (token)", yaxis=dict(autorange="reversed")
    )
    return fig
