"""The Results page's chart: steering accuracy against fluency, learned control u vs activation steering; and an
evaluation's figures against their bars as a table (steering.load().evaluate().figure()).

Input is plain data, the "activation_steering" part of results.json: per method a dict
with label, magnitudes, accuracy_clf, accuracy_vader and paired_perplexity (lists).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

METHOD_COLORS = ("#1f6fb4", "#e67e22")
JUDGES = (("accuracy_clf", "classifier", "solid", "circle"), ("accuracy_vader", "VADER", "dot", "diamond"))


def accuracy_fluency_figure(
    methods: list[Mapping], *, font_size: int = 14, title: str = "Steering accuracy against fluency"
) -> go.Figure:
    """One line per method and judge: perplexity (x, lower is more fluent) against accuracy (y).

    Each point is one steering magnitude (labelled); the curve starts at magnitude 0.
    """
    if not methods:
        raise ValueError("give at least one method's curve")
    fig = go.Figure()
    for i, curve in enumerate(methods):
        magnitudes = np.asarray(curve["magnitudes"], dtype=float)
        ppl = np.asarray(curve["paired_perplexity"], dtype=float)
        if len(magnitudes) != len(ppl):
            raise ValueError(f"{curve['label']}: {len(magnitudes)} magnitudes but {len(ppl)} perplexities")
        color = METHOD_COLORS[i % len(METHOD_COLORS)]
        for key, judge, dash, symbol in JUDGES:
            acc = np.asarray(curve[key], dtype=float)
            if len(acc) != len(ppl):
                raise ValueError(f"{curve['label']}: {len(acc)} {judge} accuracies but {len(ppl)} perplexities")
            fig.add_trace(
                go.Scatter(
                    x=ppl,
                    y=acc,
                    mode="lines+markers+text",
                    name=f"{curve['label']}, {judge} judge",
                    text=[f"{m:g}" for m in magnitudes],
                    textposition="top center",
                    line=dict(color=color, dash=dash),
                    marker=dict(symbol=symbol, size=9, color=color),
                    hovertemplate=f"{curve['label']}<br>magnitude %{{text}}<br>{judge} accuracy %{{y:.2f}}"
                    "<br>perplexity %{x:.2f}<extra></extra>",
                )
            )
    fig.add_hline(
        y=0.5, line=dict(color="gray", dash="dash"), annotation_text="chance", annotation_position="bottom right"
    )
    fig.update_layout(
        title=title,
        template="plotly_white",
        font=dict(size=font_size),
        xaxis_title="perplexity of the continuations under the unsteered model (lower: more fluent)",
        yaxis_title="fraction judged in the steered direction",
        legend=dict(orientation="h", y=-0.25),
        margin=dict(l=10, r=10, t=50, b=10),
    )
    fig.update_yaxes(range=[0, 1.05])
    return fig


def evaluation_table_figure(rows, title: str = "Evaluation") -> go.Figure:
    """One row per figure: (name, value, its bar or "", met: True / False / None where it has no bar); the figures
    differ in scale and unit, so a table, with the bars met in green and those missed in red."""
    rows = list(rows)
    if not rows:
        raise ValueError("no figures to show")
    names, values, bars, met = zip(*rows)
    shown = [f"{v:,}" if isinstance(v, int) else f"{v:.4g}" for v in values]
    verdict = ["" if m is None else ("met" if m else "missed") for m in met]
    colors = ["white" if m is None else ("#e3f4e3" if m else "#fbe3e3") for m in met]
    fig = go.Figure(
        go.Table(
            header=dict(values=["figure", "value", "bar", ""], align="left"),
            cells=dict(values=[names, shown, bars, verdict], align="left", fill_color=[colors] * 4),
        )
    )
    fig.update_layout(title=title)
    return fig
