"""Why the solver takes the steps it takes: step traces side by side, and the field over (u, τ).

Inputs are duck-typed (steering.analysis.solver_trace's SolverTrace and FieldGeometry fit): plain
numbers and arrays, nothing from the model.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _label(trace) -> str:
    u = np.asarray(trace.u, dtype=float).ravel()
    return f"u = {u[0]:+.2f}: {len(trace.accepted)} steps, NFE {trace.nfe}"


def step_trace_figure(traces, title: str = "Every attempted step of the adaptive solver") -> go.Figure:
    """Top: each attempted step's size h against where it starts (τ); bottom: its error ratio
    (log scale, the dashed line at 1 is the acceptance bound). Rejected attempts are crosses."""
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("step size h", "error ratio")
    )
    for k, trace in enumerate(traces):
        color = COLORS[k % len(COLORS)]
        steps = list(trace.steps)
        tau = np.array([s.tau for s in steps], dtype=float)
        h = np.array([s.h for s in steps], dtype=float)
        ratio = np.array([max(s.error_ratio, 1e-12) for s in steps], dtype=float)
        accepted = np.array([s.accepted for s in steps], dtype=bool)
        symbols = np.where(accepted, "circle", "x")
        sizes = np.where(accepted, 9, 13)
        hover = [
            f"attempt {i + 1}: τ = {t:.4f}, h = {hh:.4g}, error ratio {r:.3g}, {'accepted' if a else 'REJECTED'}"
            for i, (t, hh, r, a) in enumerate(zip(tau, h, ratio, accepted))
        ]
        common = dict(
            x=tau, mode="lines+markers", line=dict(color=color), hovertext=hover, hoverinfo="text", legendgroup=str(k)
        )
        marker = dict(symbol=symbols.tolist(), size=sizes.tolist(), color=color)
        fig.add_trace(go.Scatter(y=h, name=_label(trace), marker=marker, **common), row=1, col=1)
        fig.add_trace(go.Scatter(y=ratio, showlegend=False, marker=marker, **common), row=2, col=1)
    fig.add_hline(y=1.0, line=dict(color="gray", dash="dash"), row=2, col=1)
    fig.update_yaxes(type="log", title_text="h", row=1, col=1)
    fig.update_yaxes(type="log", title_text="error / tolerance", row=2, col=1)
    fig.update_xaxes(title_text="τ where the attempt starts", row=2, col=1)
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.18))
    return fig


def field_heatmaps_figure(geometry, title: str = "The field along each path, over (u, τ)") -> go.Figure:
    """Speed |α·F|, turn rate |dF̂/dτ| and (when measured) the local stretching rate, as heatmaps
    with u across and τ up."""
    panels = [("speed |α·F|", geometry.speed, "Viridis"), ("turn rate |dF̂/dτ|", geometry.curvature, "Magma")]
    if getattr(geometry, "stretching", None) is not None:
        panels.append(("stretching λ_max(S)", geometry.stretching, "RdBu_r"))
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels], horizontal_spacing=0.09)
    u, tau = np.asarray(geometry.u, dtype=float), np.asarray(geometry.tau, dtype=float)
    for k, (name, values, scale) in enumerate(panels):
        z = np.asarray(values, dtype=float).T  # [τ, u]
        extra = {}
        if scale == "RdBu_r":  # centred on 0: contraction blue, expansion red
            bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
            extra = dict(zmin=-bound, zmax=bound)
        fig.add_trace(
            go.Heatmap(
                x=u,
                y=tau,
                z=z,
                colorscale=scale,
                colorbar=dict(x=(k + 1) / len(panels) - 0.02, len=0.9, thickness=12),
                hovertemplate=f"u %{{x:+.2f}}, τ %{{y:.2f}}: {name} %{{z:.4g}}<extra></extra>",
                **extra,
            ),
            row=1,
            col=k + 1,
        )
        fig.update_xaxes(title_text="u", row=1, col=k + 1)
    fig.update_yaxes(title_text="τ", row=1, col=1)
    fig.update_layout(title=title)
    return fig


def stretching_figure(geometry, title: str = "Local stretching rate per u (negative: contraction)") -> go.Figure:
    """The local stretching rate against u: its largest and its mean over τ, with 0 marked."""
    values = np.asarray(geometry.stretching, dtype=float)
    u = np.asarray(geometry.u, dtype=float)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=u, y=values.max(axis=1), mode="lines+markers", name="largest over τ"))
    fig.add_trace(go.Scatter(x=u, y=values.mean(axis=1), mode="lines+markers", name="mean over τ"))
    fig.add_hline(y=0.0, line=dict(color="gray", dash="dash"))
    fig.update_layout(title=title, xaxis_title="u", yaxis_title="λ_max((J + Jᵀ)/2)")
    return fig
