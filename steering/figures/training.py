"""Training curves of the hybrid against the discrete baseline, from the JSONL training logs.

Each log is a list of records as steering.training.train writes them ({"stage", "step", "loss",
"grad_norm", "ode_grad_norm", "alpha", "val_loss", ...}). Stage 2 (steering) continues
after stage 1 on one step axis and is shaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .steer import style_figure

MODEL_COLORS = {"hybrid": "#1f6fb4", "discrete": "#e67e22"}
FALLBACK_COLORS = ("#2ca02c", "#9467bd", "#8c564b")
PANELS = (
    ("loss", "training loss"),
    ("grad_norm", "total grad norm (before clipping)"),
    ("ode_grad_norm", "middle-block grad norm (ODE block in the hybrid)"),
    ("alpha", "α, the ODE output scale"),
)


def global_steps(records: Sequence[dict]) -> np.ndarray:
    """One step axis over all stages: each stage continues where the previous one ended."""
    offsets, seen_max, steps = {}, {}, []
    for r in records:
        stage = r.get("stage", 1)
        seen_max[stage] = max(seen_max.get(stage, -1), r["step"])
    running = 0
    for stage in sorted(seen_max):
        offsets[stage] = running
        running += seen_max[stage] + 1
    for r in records:
        steps.append(offsets[r.get("stage", 1)] + r["step"])
    return np.asarray(steps, dtype=int)


def ema(values: Sequence[float], span: int) -> np.ndarray:
    """Exponential moving average with the usual span (span 1 returns the values)."""
    values = np.asarray(values, dtype=float)
    if span <= 1 or values.size == 0:
        return values.copy()
    a = 2.0 / (span + 1.0)
    out = np.empty_like(values)
    acc = values[0]
    for i, v in enumerate(values):
        acc = a * v + (1 - a) * acc
        out[i] = acc
    return out


def _color(name: str, i: int) -> str:
    return MODEL_COLORS.get(name.lower().split()[0], FALLBACK_COLORS[i % len(FALLBACK_COLORS)])


def training_curves_figure(logs: Mapping[str, Sequence[dict]], *, smooth: int = 15, font_size: int = 14) -> go.Figure:
    """2×2 panels (loss with validation points, grad norm, middle-block grad norm, α), one colour per model."""
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=[title for _, title in PANELS], horizontal_spacing=0.08, vertical_spacing=0.14
    )
    stage2_start, last_step = None, 0
    for i, (name, records) in enumerate(logs.items()):
        records = list(records)
        if not records:
            continue
        steps = global_steps(records)
        last_step = max(last_step, int(steps.max()))
        color = _color(name, i)
        for stage, r in zip([r.get("stage", 1) for r in records], steps):
            if stage == 2:
                stage2_start = int(r) if stage2_start is None else min(stage2_start, int(r))
                break
        for k, (key, _) in enumerate(PANELS):
            row, col = divmod(k, 2)
            pairs = [(s, r[key]) for s, r in zip(steps, records) if r.get(key) is not None]
            if not pairs:
                continue
            xs = np.array([p[0] for p in pairs])
            ys = np.array([p[1] for p in pairs], dtype=float)
            if key != "alpha" and len(ys) > smooth:
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=ys,
                        mode="lines",
                        line=dict(width=1, color=color),
                        opacity=0.25,
                        name=f"{name} (raw)",
                        legendgroup=name,
                        showlegend=False,
                        hoverinfo="skip",
                    ),
                    row=row + 1,
                    col=col + 1,
                )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ema(ys, smooth if key != "alpha" else 1),
                    mode="lines",
                    line=dict(width=2.5, color=color),
                    name=name,
                    legendgroup=name,
                    showlegend=k == 0,
                    hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>",
                ),
                row=row + 1,
                col=col + 1,
            )
        val = [(s, r["val_loss"]) for s, r in zip(steps, records) if r.get("val_loss") is not None]
        if val:
            fig.add_trace(
                go.Scatter(
                    x=[v[0] for v in val],
                    y=[v[1] for v in val],
                    mode="markers",
                    marker=dict(size=9, color=color, symbol="diamond", line=dict(width=1, color="white")),
                    name=f"{name} validation",
                    legendgroup=name,
                    hovertemplate=f"{name} validation<br>step %{{x}}<br>%{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=1,
            )
    if stage2_start is not None:
        for k in range(4):
            row, col = divmod(k, 2)
            fig.add_vrect(
                x0=stage2_start, x1=last_step, fillcolor="#f1c40f", opacity=0.10, line_width=0, row=row + 1, col=col + 1
            )
        fig.add_annotation(
            x=stage2_start,
            y=1,
            xref="x",
            yref="y domain",
            text=" stage 2: steering",
            showarrow=False,
            xanchor="left",
            yanchor="top",
            font=dict(size=font_size - 2),
        )
    for k in range(4):
        row, col = divmod(k, 2)
        fig.update_xaxes(title_text="optimiser step" if row == 1 else None, row=row + 1, col=col + 1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.08, x=0))
    return style_figure(fig, font_size, height=640)
