"""Solver comparison pictures: divergence along τ, and where each solver evaluated the field."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def divergence_figure(
    comparisons, title: str = "Relative divergence ||H_a(τ) − H_b(τ)|| / ||H_b(τ)||", log_y: bool = True
) -> go.Figure:
    """One line per comparison (objects with tau, divergence, a.solver_label, b.solver_label)."""
    comparisons = comparisons if isinstance(comparisons, (list, tuple)) else [comparisons]
    if not comparisons:
        raise ValueError("no comparisons to draw")
    fig = go.Figure()
    for c in comparisons:
        tau, div = np.asarray(c.tau, dtype=float), np.asarray(c.divergence, dtype=float)
        keep = div > 0 if log_y else np.ones_like(div, dtype=bool)  # τ = 0 is exactly 0: off a log axis
        fig.add_trace(
            go.Scatter(x=tau[keep], y=div[keep], mode="lines+markers", name=f"{c.a.solver_label} vs {c.b.solver_label}")
        )
    fig.update_layout(
        title=title,
        xaxis_title="depth τ",
        yaxis_title="relative divergence",
        yaxis_type="log" if log_y else "linear",
        xaxis_range=[0, 1],
    )
    return fig


def eval_points_figure(trajectories, title: str = "Where each solver evaluated the field") -> go.Figure:
    """A row per trajectory: every field evaluation (dots), accepted step starts (|) and rejected ones (×).

    Three traces per trajectory (evaluations, accepted, rejected), in that order.
    """
    trajectories = trajectories if isinstance(trajectories, (list, tuple)) else [trajectories]
    if not trajectories:
        raise ValueError("no trajectories to draw")
    fig = go.Figure()
    labels = []
    for t in trajectories:
        label = f"{t.solver_label} · NFE {t.nfe}"
        labels.append(label)
        fig.add_trace(
            go.Scatter(
                x=list(t.eval_taus),
                y=[label] * len(t.eval_taus),
                mode="markers",
                name=f"{t.solver_label}: evaluations",
                marker=dict(size=7, opacity=0.6),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=list(t.accepted_taus),
                y=[label] * len(t.accepted_taus),
                mode="markers",
                name=f"{t.solver_label}: accepted steps",
                marker=dict(symbol="line-ns-open", size=18, color="green"),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=list(t.rejected_taus),
                y=[label] * len(t.rejected_taus),
                mode="markers",
                name=f"{t.solver_label}: rejected steps",
                marker=dict(symbol="x", size=10, color="red"),
            )
        )
    # the project's adaptive solves land on τ = 1 (ode.adaptive_options); keep any evaluation past it in view
    right = max([1.0] + [float(x) for t in trajectories for x in t.eval_taus]) + 0.02
    fig.update_layout(
        title=title,
        xaxis_title="depth τ",
        yaxis_title="solver",
        xaxis_range=[-0.02, right],
        yaxis=dict(categoryorder="array", categoryarray=labels),
    )
    return fig
