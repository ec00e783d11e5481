"""The regimes map: dopri5's NFE over (u, tolerance) as a heatmap with each cell's reason, and beneath it, at a
tolerance picked on the map's slider, NFE against u (the paper's Fig. 3) and the first step h(u) with the
thresholds 1/11, 1/111, … that set the first-step rule's levels. The slider restyles the two lower panels in
the browser: picking a tolerance redraws them in one frame, with no round trip."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

REASON_MARKERS = {"error-limited": ("circle-open", "#555"), "rejected": ("x-thin-open", "black")}


def _fraction(threshold: float) -> str:
    return "1" if threshold >= 1 else f"1/{round(1 / threshold):d}"


def regimes_map_figure(m, active_row: int | None = None, thresholds=(1.0, 1 / 11, 1 / 111, 1 / 1111)) -> go.Figure:
    """m: a steering.analysis.regimes_map.PromptMap (u, t, nfe, reason, predicted, first_step, bands,
    band_rows) or anything with those fields; active_row: the tolerance the lower panels show first."""
    u, t = np.asarray(m.u, dtype=float), np.asarray(m.t, dtype=float)
    nfe, h = np.asarray(m.nfe), np.asarray(m.first_step, dtype=float)
    predicted = np.asarray(m.predicted)
    log_t = np.log10(t)
    row = int(len(t) // 2 if active_row is None else active_row)
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.54, 0.24, 0.22],
        vertical_spacing=0.05,
    )
    hover = [
        [
            f"u {u[j]:+.2f}, t {t[i]:.3g}<br>NFE {nfe[i, j]} ({m.reason[i][j]})"
            + (f", first-step rule {predicted[i, j]}" if predicted[i, j] else "")
            + f"<br>first step h {h[i, j]:.4g}"
            for j in range(len(u))
        ]
        for i in range(len(t))
    ]
    fig.add_trace(
        go.Heatmap(
            x=u,
            y=log_t,
            z=nfe,
            text=hover,
            hoverinfo="text",
            colorscale="Viridis",
            colorbar=dict(title="NFE", len=0.5, y=0.76),
            name="NFE",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            marker=dict(symbol="square", color="rgba(0,0,0,0)"),
            name="cap-limited: no mark",
            legendgroup="reasons",
        ),
        row=1,
        col=1,
    )
    for reason, (symbol, colour) in REASON_MARKERS.items():
        cells = [(u[j], log_t[i]) for i in range(len(t)) for j in range(len(u)) if m.reason[i][j] == reason]
        fig.add_trace(
            go.Scatter(
                x=[c[0] for c in cells] or [None],
                y=[c[1] for c in cells] or [None],
                mode="markers",
                marker=dict(symbol=symbol, size=5, color=colour, line=dict(width=1, color=colour)),
                name=reason,
                hoverinfo="skip",
                legendgroup="reasons",
            ),
            row=1,
            col=1,
        )
    for band in getattr(m, "bands", []):
        if band.kind != "cap-limited":
            continue
        fig.add_hrect(
            y0=math.log10(band.t_low),
            y1=math.log10(band.t_high),
            line=dict(color="white", width=2, dash="dot"),
            row=1,
            col=1,
        )
    # the chosen tolerance: a line on the map, NFE against u and the first step beneath (the slider restyles these)
    moving = list(range(len(fig.data), len(fig.data) + 4))
    fig.add_trace(
        go.Scatter(x=[u[0], u[-1]], y=[log_t[row]] * 2, mode="lines", line=dict(color="red", width=2), name="chosen t"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=u, y=nfe[row], mode="lines+markers", line_shape="hvh", name="NFE at the chosen t"),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=u,
            y=np.where(predicted[row] > 0, predicted[row], np.nan),
            mode="markers",
            marker=dict(symbol="diamond-open", size=9, color="firebrick"),
            name="first-step rule: 2 + 6k",
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=u, y=h[row], mode="lines+markers", name="first step h(u)", line=dict(color="darkorange")),
        row=3,
        col=1,
    )
    low, high = float(h.min()) / 1.5, float(h.max()) * 1.5
    for threshold in thresholds:
        if low <= threshold <= high:
            fig.add_hline(y=threshold, line=dict(color="gray", dash="dash"), row=3, col=1)
            fig.add_annotation(  # on a log axis an annotation's y is log10 of the value
                x=u[0],
                y=math.log10(threshold),
                text=f"h = {_fraction(threshold)}",
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                row=3,
                col=1,
            )
    fig.update_yaxes(
        title_text="tolerance t",
        tickvals=list(range(math.floor(log_t.min()), math.ceil(log_t.max()) + 1)),
        ticktext=[f"1e{k}" for k in range(math.floor(log_t.min()), math.ceil(log_t.max()) + 1)],
        row=1,
        col=1,
    )
    levels = nfe.min(), nfe.max()
    fig.update_yaxes(title_text="NFE", range=[levels[0] - 3, levels[1] + 3], row=2, col=1)
    fig.update_yaxes(title_text="first step h", type="log", range=[math.log10(low), math.log10(high)], row=3, col=1)
    fig.update_xaxes(title_text="u", row=3, col=1)
    steps = [
        dict(
            method="restyle",
            label=f"{t[i]:.3g}",
            args=[
                {
                    "y": [
                        [log_t[i]] * 2,
                        nfe[i].tolist(),
                        [float(p) if p > 0 else None for p in predicted[i]],
                        h[i].tolist(),
                    ]
                },
                moving,
            ],
        )
        for i in range(len(t))
    ]
    fig.update_layout(
        sliders=[dict(active=row, steps=steps, currentvalue=dict(prefix="tolerance t = "), pad=dict(t=50), y=-0.02)],
        legend=dict(orientation="h", y=1.01, x=0, yanchor="bottom"),
        margin=dict(t=70),
    )
    return fig
