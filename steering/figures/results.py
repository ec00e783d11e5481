"""The Results page's chart: steering accuracy against fluency, learned control u vs activation steering.

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
