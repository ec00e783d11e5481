"""Contraction along the path and solver convergence (second paper)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .flow import u_colors


def contraction_figure(contractions, title: str = "Contraction along depth") -> go.Figure:
    """Top: finite-time Lyapunov exponent λ(τ); bottom: top eigenvalue of the symmetric Jacobian.
    One colour per control (objects with tau, u, ftle, top_symmetric_eigenvalue); zero dashed.
    Two traces per contraction: its λ(τ), then its eigenvalue.
    """
    contractions = contractions if isinstance(contractions, (list, tuple)) else [contractions]
    if not contractions:
        raise ValueError("nothing to draw")
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("perturbation growth: FTLE λ(τ) = ln(|δ(τ)|/|δ(0)|)/τ", "top eigenvalue of (J + Jᵀ)/2"),
    )
    colors = u_colors([c.u[0] for c in contractions]) if len(contractions) > 1 else ["royalblue"]
    for c, color in zip(contractions, colors):
        label = f"u=({c.u[0]:+.2f}, {c.u[1]:+.2f})"
        fig.add_trace(
            go.Scatter(
                x=np.asarray(c.tau),
                y=np.asarray(c.ftle),
                mode="lines",
                name=label,
                line=dict(color=color),
                legendgroup=label,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=np.asarray(c.tau),
                y=np.asarray(c.top_symmetric_eigenvalue),
                mode="lines",
                name=label,
                line=dict(color=color, dash="dot"),
                legendgroup=label,
                showlegend=False,
            ),
            row=2,
            col=1,
        )
    for row in (1, 2):
        fig.add_hline(y=0, line=dict(color="gray", dash="dash"), row=row, col=1)
    fig.update_layout(title=title)
    fig.update_xaxes(title_text="depth τ", row=2, col=1)
    fig.update_yaxes(title_text="FTLE λ", row=1, col=1)
    fig.update_yaxes(title_text="λ_max(S)", row=2, col=1)
    return fig


def convergence_figure(conv, title: str = "Convergence at τ = 1 against a tight dopri5 reference") -> go.Figure:
    """log-log error against steps N for Euler and RK4 (fitted orders in the legend), and the
    floor below which errors are the reference's own and left out of the fits."""
    steps = np.asarray(conv.steps, dtype=float)

    def name(method, order):
        return f"{method} (order {order:.2f})" if np.isfinite(order) else f"{method} (order: too few points)"

    fig = go.Figure(
        [
            go.Scatter(
                x=steps, y=np.asarray(conv.euler_error), mode="lines+markers", name=name("Euler", conv.euler_order)
            ),
            go.Scatter(x=steps, y=np.asarray(conv.rk4_error), mode="lines+markers", name=name("RK4", conv.rk4_order)),
            go.Scatter(
                x=[steps[0], steps[-1]],
                y=[conv.floor] * 2,
                mode="lines",
                name="reference floor",
                line=dict(color="gray", dash="dash"),
            ),
        ]
    )
    fig.update_layout(
        title=title, xaxis_title="steps N", yaxis_title="relative error at τ = 1", xaxis_type="log", yaxis_type="log"
    )
    return fig
