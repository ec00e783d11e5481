"""NFE against the control (two regimes), NFE against tolerance, and the steering sweep curves."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def nfe_regimes_figure(regimes, title: str = "Solver work against the control") -> go.Figure:
    """NFE per solver against u (left axis), P(first target) relative to the pair (right axis),
    with the regime switch and the semantic crossover marked as vertical lines.

    regimes: an object with u, nfe (solver -> values), target_probability, targets, switch_u,
    crossover_u, axis (steering.analysis.regimes.Regimes fits).
    """
    u = np.asarray(regimes.u, dtype=float)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for solver, values in regimes.nfe.items():
        fig.add_trace(go.Scatter(x=u, y=np.asarray(values), mode="lines+markers", name=f"NFE {solver}",
                                 line_shape="hv"), secondary_y=False)
    targets = list(getattr(regimes, "targets", []) or ["target 1", "target 2"])
    fig.add_trace(go.Scatter(x=u, y=np.asarray(regimes.target_probability), mode="lines",
                             name=f"P({targets[0]!r}) / (P({targets[0]!r}) + P({targets[1]!r}))",
                             line=dict(color="gray", dash="dot")), secondary_y=True)
    if regimes.switch_u is not None:
        fig.add_vline(x=regimes.switch_u, line=dict(color="firebrick", dash="dash"),
                      annotation_text=f"regime switch u={regimes.switch_u:+.2f}", annotation_position="top left")
    if regimes.crossover_u is not None:
        fig.add_vline(x=regimes.crossover_u, line=dict(color="royalblue", dash="dot"),
                      annotation_text=f"crossover u={regimes.crossover_u:+.2f}", annotation_position="bottom right")
    fig.update_layout(title=title, xaxis_title=f"control u ({getattr(regimes, 'axis', 'sentiment')})")
    fig.update_yaxes(title_text="function evaluations (NFE)", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="relative probability", range=[0, 1], secondary_y=True)
    return fig


def tolerance_figure(scaling, title: str = "Resolution scaling: NFE against tolerance") -> go.Figure:
    """log-log NFE against 1/tolerance and the fitted power law (its slope in the legend)."""
    tol = np.asarray(scaling.tolerances, dtype=float)
    nfe = np.asarray(scaling.nfe, dtype=float)
    inverse = 1.0 / tol
    intercept = np.mean(np.log10(nfe) - scaling.slope * np.log10(inverse))
    fig = go.Figure([
        go.Scatter(x=inverse, y=nfe, mode="lines+markers", name=f"{getattr(scaling, 'solver', 'solver')} NFE"),
        go.Scatter(x=inverse, y=10 ** (intercept + scaling.slope * np.log10(inverse)), mode="lines",
                   name=f"fit: NFE ∝ (1/tol)^{scaling.slope:.3f}", line=dict(dash="dash", color="gray")),
    ])
    fig.update_layout(title=title, xaxis_title="1 / tolerance (rtol = atol)", yaxis_title="NFE",
                      xaxis_type="log", yaxis_type="log")
    return fig


def steering_sweep_figure(sweep, relative: bool = False,
                          title: str = "Next-token probability against the control") -> go.Figure:
    """One curve per target token against u (raw probabilities, or renormalised among the targets)."""
    u = np.asarray(sweep.u, dtype=float)
    values = np.asarray(sweep.relative if relative else sweep.probabilities, dtype=float)
    fig = go.Figure([go.Scatter(x=u, y=values[:, i], mode="lines+markers", name=repr(token))
                     for i, token in enumerate(sweep.target_tokens)])
    fig.update_layout(title=title, xaxis_title=f"control u ({getattr(sweep, 'axis', 'sentiment')})",
                      yaxis_title="relative probability among targets" if relative else "next-token probability",
                      yaxis_range=[0, 1.02] if relative else None, legend_title_text="target")
    return fig
