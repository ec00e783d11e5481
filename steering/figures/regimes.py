"""NFE against the control (two regimes), NFE against tolerance, and the steering sweep curves."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def _level(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.1f}"


SWITCH_ROW_HEIGHT = 0.07  # of the plot's height, between rows of switch labels
PLOT_WIDTH_PX = 650  # about the NFE plot's drawing width in the lab, for how much of u a label covers
LABEL_CHAR_PX = 7


def _switch_label(switch, switches) -> str:
    """Two lines with u for a few switches; the levels alone when there are many (u is the line's x)."""
    levels = f"{_level(switch.from_level)} → {_level(switch.to_level)}"
    return f"{levels} NFE<br>u={switch.u:+.2f}" if len(switches) <= 2 else levels


def switch_label_rows(positions, u, label: str) -> list[int]:
    """A row for each switch label (positions sorted), so that no two labels in a row overlap: each goes to
    the first row whose last label ends, with a margin, before it starts."""
    u = np.asarray(u, dtype=float)
    span = float(u.max() - u.min()) if len(u) > 1 else 1.0
    longest = max(len(line) for line in label.split("<br>"))
    width = span * (longest * LABEL_CHAR_PX + 12) / PLOT_WIDTH_PX
    row_ends: list[float] = []
    rows = []
    for x in positions:
        row = next((r for r, end in enumerate(row_ends) if x - width / 2 >= end), len(row_ends))
        if row == len(row_ends):
            row_ends.append(-np.inf)
        row_ends[row] = x + width / 2
        rows.append(row)
    return rows


def nfe_regimes_figure(regimes, title: str = "Solver work against the control") -> go.Figure:
    """NFE per solver against u (left axis), P(first target) relative to the pair (right axis),
    every regime switch as a vertical line labelled with its levels, and the semantic crossover.

    regimes: an object with u, nfe (solver -> values), target_probability, targets, switches
    (each with u, from_level, to_level), crossover_u, axis (steering.analysis.regimes.Regimes fits).
    """
    u = np.asarray(regimes.u, dtype=float)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for solver, values in regimes.nfe.items():
        fig.add_trace(
            go.Scatter(x=u, y=np.asarray(values), mode="lines+markers", name=f"NFE {solver}", line_shape="hvh"),
            secondary_y=False,
        )  # level changes drawn midway, where the switches sit
    targets = list(getattr(regimes, "targets", []) or ["target 1", "target 2"])
    fig.add_trace(
        go.Scatter(
            x=u,
            y=np.asarray(regimes.target_probability),
            mode="lines",
            name=f"P({targets[0]!r}) / (P({targets[0]!r}) + P({targets[1]!r}))",
            line=dict(color="gray", dash="dot"),
        ),
        secondary_y=True,
    )
    switches = sorted(getattr(regimes, "switches", None) or [], key=lambda s: s.u)
    for switch in switches:
        fig.add_vline(x=switch.u, line=dict(color="firebrick", dash="dash"))
    labels = [_switch_label(switch, switches) for switch in switches]
    rows = switch_label_rows([switch.u for switch in switches], u, max(labels, key=len, default=""))
    for switch, label, row in zip(switches, labels, rows):
        fig.add_annotation(
            x=switch.u,
            y=1.0 + SWITCH_ROW_HEIGHT * row,  # rows stack above the plot, off the NFE line
            xref="x",
            yref="paper",
            yanchor="bottom",
            text=label,
            showarrow=False,
            font=dict(color="firebrick", size=11),
            bgcolor="rgba(255,255,255,0.85)",
        )
    if regimes.crossover_u is not None:
        fig.add_vline(
            x=regimes.crossover_u,
            line=dict(color="royalblue", dash="dot"),
            annotation_text=f"crossover u={regimes.crossover_u:+.2f}",
            annotation_position="bottom right",
        )
    fig.update_layout(title=title, xaxis_title=f"control u ({getattr(regimes, 'axis', 'sentiment')})")
    if rows:  # room above the plot for the label rows, below the title
        fig.update_layout(margin=dict(t=90 + 22 * max(rows)), title=dict(y=0.98, yanchor="top"))
    fig.update_yaxes(title_text="function evaluations (NFE)", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="relative probability", range=[0, 1], secondary_y=True)
    return fig


def alignment_figure(alignment, title: str = "Crossover against the NFE switches, prompt by prompt") -> go.Figure:
    """A strip per prompt: its switches (red ticks), its crossover (blue diamond, filled when aligned),
    and the band within `threshold` of each switch.

    alignment: an object with prompts (each with prompt, switches (with u), crossover_u, aligned),
    u and stats (with threshold, aligned_share, null_aligned_share); steering.analysis.alignment.Alignment fits.
    """
    rows = list(alignment.prompts)
    if not rows:
        raise ValueError("no prompts to draw")
    stats = alignment.stats
    threshold = float(stats.get("threshold", 0.1))
    names = [f"{i + 1}. {r.prompt[:40]}" + ("…" if len(r.prompt) > 40 else "") for i, r in enumerate(rows)]
    fig = go.Figure()
    sx, sy, bx, by = [], [], [], []
    for name, row in zip(names, rows):
        for switch in row.switches:
            sx.append(switch.u)
            sy.append(name)
            bx += [switch.u - threshold, switch.u + threshold, None]
            by += [name, name, None]
    fig.add_trace(
        go.Scatter(
            x=bx,
            y=by,
            mode="lines",
            name=f"within {threshold:g} of a switch",
            line=dict(color="rgba(178,34,34,0.25)", width=12),
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=sx,
            y=sy,
            mode="markers",
            name="NFE switch",
            marker=dict(symbol="line-ns-open", size=16, color="firebrick", line=dict(width=3)),
        )
    )
    crossed = [(name, row) for name, row in zip(names, rows) if row.crossover_u is not None]
    fig.add_trace(
        go.Scatter(
            x=[row.crossover_u for _, row in crossed],
            y=[name for name, _ in crossed],
            mode="markers",
            name="semantic crossover",
            marker=dict(
                symbol=["diamond" if row.aligned else "diamond-open" for _, row in crossed],
                size=11,
                color="royalblue",
                line=dict(width=2, color="royalblue"),
            ),
        )
    )
    u = np.asarray(alignment.u, dtype=float)
    share, null = stats.get("aligned_share"), stats.get("null_aligned_share")
    note = "" if share is None else f": aligned {share:.0%} (a random crossover: {null:.0%})"
    fig.update_layout(
        title=title + note,
        xaxis_title="control u",
        xaxis_range=[u[0] - 0.05, u[-1] + 0.05],
        yaxis=dict(autorange="reversed", type="category"),
        height=max(320, 60 + 34 * len(rows)),
        legend=dict(orientation="h", y=-0.15),
    )
    return fig


def tolerance_figure(scaling, title: str = "Resolution scaling: NFE against tolerance") -> go.Figure:
    """log-log NFE against 1/tolerance and the fitted power law (its slope in the legend)."""
    tol = np.asarray(scaling.tolerances, dtype=float)
    nfe = np.asarray(scaling.nfe, dtype=float)
    inverse = 1.0 / tol
    intercept = np.mean(np.log10(nfe) - scaling.slope * np.log10(inverse))
    fig = go.Figure(
        [
            go.Scatter(x=inverse, y=nfe, mode="lines+markers", name=f"{getattr(scaling, 'solver', 'solver')} NFE"),
            go.Scatter(
                x=inverse,
                y=10 ** (intercept + scaling.slope * np.log10(inverse)),
                mode="lines",
                name=f"fit: NFE ∝ (1/tol)^{scaling.slope:.3f}",
                line=dict(dash="dash", color="gray"),
            ),
        ]
    )
    fig.update_layout(
        title=title, xaxis_title="1 / tolerance (rtol = atol)", yaxis_title="NFE", xaxis_type="log", yaxis_type="log"
    )
    return fig


def steering_sweep_figure(
    sweep, relative: bool = False, title: str = "Next-token probability against the control"
) -> go.Figure:
    """One curve per target token against u (raw probabilities, or renormalised among the targets)."""
    u = np.asarray(sweep.u, dtype=float)
    values = np.asarray(sweep.relative if relative else sweep.probabilities, dtype=float)
    fig = go.Figure(
        [
            go.Scatter(x=u, y=values[:, i], mode="lines+markers", name=repr(token))
            for i, token in enumerate(sweep.target_tokens)
        ]
    )
    fig.update_layout(
        title=title,
        xaxis_title=f"control u ({getattr(sweep, 'axis', 'sentiment')})",
        yaxis_title="relative probability among targets" if relative else "next-token probability",
        yaxis_range=[0, 1.02] if relative else None,
        legend_title_text="target",
    )
    return fig
