"""The Compare page's charts with both models on one figure: dopri5's NFE and first step against u, and the
fixed solver's divergence from dopri5 along τ. Plain data in, go.Figure out."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

SIDE_COLORS = ("#d62728", "#1f6fb4")  # model A, model B
SIDE_DASHES = ("solid", "dash")  # so two models on one NFE level stay both visible


def nfe_pair_figure(
    u,
    nfe: Mapping[str, np.ndarray],
    first_step: Mapping[str, np.ndarray],
    threshold: float,
    threshold_u: Mapping[str, float | None],
    title: str = "dopri5's work against u, both models",
) -> go.Figure:
    """Top: NFE against u per model. Bottom: the first step h per model (log scale) and the threshold below which
    a solve needs a third step, with a vertical line where each model's first step crosses it."""
    u = np.asarray(u, dtype=float)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    for k, name in enumerate(nfe):
        style = dict(color=SIDE_COLORS[k % 2], dash=SIDE_DASHES[k % 2], width=3 - k)
        fig.add_trace(
            go.Scatter(
                x=u, y=np.asarray(nfe[name]), mode="lines+markers", name=f"NFE {name}", line=style, line_shape="hvh"
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=u,
                y=np.asarray(first_step[name]),
                mode="lines+markers",
                name=f"first step {name}",
                line=style,
                showlegend=True,
            ),
            row=2,
            col=1,
        )
        crossing = threshold_u.get(name)
        if crossing is not None:
            fig.add_vline(x=crossing, line=dict(color=SIDE_COLORS[k % 2], dash="dot"), row=2, col=1)
    fig.add_hline(
        y=threshold,
        line=dict(color="#555", dash="dot"),
        annotation_text=f"h = {threshold:.3f}: below it, a third step",
        annotation_position="bottom right",
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text="NFE", row=1, col=1)
    fig.update_yaxes(title_text="first step h", type="log", row=2, col=1)
    fig.update_xaxes(title_text="u₁", row=2, col=1)
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.15))
    return fig


def divergence_pair_figure(
    tau: Mapping[str, np.ndarray],
    divergence: Mapping[str, np.ndarray],
    title: str = "Each model's fixed solver against dopri5, along τ",
) -> go.Figure:
    """||H_fixed(τ) − H_dopri5(τ)|| / ||H_dopri5(τ)|| per model (log scale)."""
    fig = go.Figure()
    for k, name in enumerate(divergence):
        values = np.maximum(np.asarray(divergence[name], dtype=float), 1e-12)  # τ = 0 is exactly 0
        fig.add_trace(
            go.Scatter(
                x=np.asarray(tau[name]),
                y=values,
                mode="lines+markers",
                name=name,
                line=dict(color=SIDE_COLORS[k % 2], dash=SIDE_DASHES[k % 2]),
            )
        )
    fig.update_layout(title=title, xaxis_title="τ", yaxis=dict(title="relative divergence", type="log"))
    return fig


def compare_slide_figure(
    bend_paths: Mapping[str, list],
    orthogonal_share: Mapping[str, float],
    u,
    nfe: Mapping[str, np.ndarray],
    first_step: Mapping[str, np.ndarray],
    threshold: float,
) -> go.Figure:
    """One slide: each model's paths in its own bend view (top, side by side, with the largest ⊥ share in the
    title) and dopri5's NFE against u for both (bottom)."""
    from .flow import pca_paths_figure

    names = list(bend_paths)
    titles = [f"{name}: bend view, ⊥ share up to {orthogonal_share[name]:.2%}" for name in names]
    fig = make_subplots(
        rows=2,
        cols=2,
        specs=[[{}, {}], [{"colspan": 2}, None]],
        subplot_titles=titles + ["dopri5's NFE against u₁ (rtol 1e-3)"],
        vertical_spacing=0.14,
    )
    for col, name in enumerate(names, start=1):
        for trace in pca_paths_figure(bend_paths[name], equal_scale=True).data:
            trace.showlegend = col == 1 and trace.showlegend is not False
            fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(title_text="along the chord", row=1, col=col)
        # one scale on both axes, so each bend is drawn at its true size (as the page's bend view)
        fig.update_yaxes(title_text="departure", scaleanchor="x" if col == 1 else "x2", row=1, col=col)
    u = np.asarray(u, dtype=float)
    for k, name in enumerate(names):
        below = int(np.sum(np.asarray(first_step[name]) < threshold))
        fig.add_trace(
            go.Scatter(
                x=u,
                y=np.asarray(nfe[name]),
                mode="lines+markers",
                line_shape="hvh",
                name=f"NFE {name} (first step below {threshold:.3f} at {below} of {len(u)} u)",
                line=dict(color=SIDE_COLORS[k % 2], dash=SIDE_DASHES[k % 2], width=3 - k),
            ),
            row=2,
            col=1,
        )
    fig.update_xaxes(title_text="u₁", row=2, col=1)
    fig.update_yaxes(title_text="NFE", row=2, col=1)
    fig.update_layout(title="Two models side by side", legend=dict(orientation="h", y=-0.12))
    return fig
