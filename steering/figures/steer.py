"""The Steer page's figure: next-token bars and the current path in the PCA map.

Plain data in, go.Figure out. Token text comes from the model, so before it reaches a
label it is made visible (leading spaces, newlines) and inert (plotly reads a few
HTML-like tags in labels; angle brackets are swapped for look-alikes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.utils import PlotlyJSONEncoder

NEGATIVE, NEUTRAL, POSITIVE = "#c0392b", "#bdbdbd", "#1f6fb4"
U_COLORSCALE = [[0.0, NEGATIVE], [0.5, NEUTRAL], [1.0, POSITIVE]]
CURRENT = "#111111"
FONT = "Inter, Segoe UI, Helvetica, Arial, sans-serif"


def display_token(text: str) -> str:
    """A token as a label: a leading space shown as ␣, newlines as ↵, angle brackets inert."""
    if text == "":
        return "∅"
    shown = text.replace("\n", "↵").replace("\r", "↵").replace("\t", "⇥")
    shown = shown.replace("<", "‹").replace(">", "›")
    if shown.startswith(" "):
        shown = "␣" + shown[1:]
    return shown


def plain_label(text: str) -> str:
    """Any user or model text made inert for a plotly title or hover label."""
    return text.replace("<", "‹").replace(">", "›")


@cache
def _template_json(name: str) -> str:
    return json.dumps(pio.templates[name].to_plotly_json(), cls=PlotlyJSONEncoder)


def _template(name: str = "plotly_white") -> dict:
    """A fresh copy of a plotly template as plain data (unvalidated figures keep what they get)."""
    return json.loads(_template_json(name))


def style_layout(font_size: int = 14, height: int | None = None) -> dict:
    """One look for every lab figure: white, large enough type for a projector when asked."""
    layout = dict(
        template=_template(),
        font=dict(family=FONT, size=font_size),
        margin=dict(l=10, r=10, t=50, b=10),
        title=dict(font=dict(size=round(font_size * 1.15))),
    )
    if height is not None:
        layout["height"] = height
    return layout


def style_figure(fig: go.Figure, font_size: int = 14, height: int | None = None) -> go.Figure:
    fig.update_layout(style_layout(font_size, height))
    return fig


def unvalidated_figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, without plotly.py's property validation.

    Validation costs about 25 ms per figure, and the Steer page rebuilds two figures on every
    slider move; the tests validate these figures instead (go.Figure(fig.to_dict())).
    """
    return go.Figure(data=traces, layout=layout, _validate=False)


def _next_token_bars(tokens: Sequence[str], probs: Sequence[float], color: str) -> tuple[dict, dict, dict]:
    """The bar trace and its x and y axes: horizontal bars, most likely token on top, with percentages."""
    if len(tokens) != len(probs):
        raise ValueError(f"{len(tokens)} tokens but {len(probs)} probabilities")
    p = np.asarray(probs, dtype=float)
    order = np.argsort(-p, kind="stable")
    labels = [display_token(tokens[i]) for i in order][::-1]
    values = p[order][::-1]
    # the axis only grows in steps of 0.1, so it stays still while a slider is dragged
    top = float(np.ceil(max(float(values.max(initial=0.0)) * 1.25, 0.1) * 10) / 10)
    bars = dict(
        type="bar",
        x=values.tolist(),
        y=labels,
        orientation="h",
        marker=dict(color=color),
        showlegend=False,
        hovertemplate="%{y}: %{x:.2%}<extra></extra>",
    )
    xaxis = dict(title=dict(text="probability"), range=[0, min(top, 1.0)], tickformat=".0%", automargin=False)
    # the percentages go in the axis labels, not as text beside each bar: plotly measures and
    # places bar text on every redraw, which cost about 25 ms of each slider move in the browser
    yaxis = dict(
        type="category",
        automargin=False,
        tickmode="array",
        tickvals=labels,
        ticktext=[f"{label}  {v:.1%}" for label, v in zip(labels, values)],
    )
    return bars, xaxis, yaxis


def _flow_map(
    reference_paths: Sequence[np.ndarray],
    reference_u: Sequence[float],
    current: np.ndarray,
    current_u: float,
    explained: Sequence[float] | None,
) -> tuple[list[dict], dict, dict]:
    """Reference paths (thin, coloured by u), the current path (thick) and its ends; x and y axes
    fixed to the reference paths' extent (plus margin), so moving u moves only the current path."""
    if len(reference_paths) != len(reference_u):
        raise ValueError(f"{len(reference_paths)} reference paths but {len(reference_u)} u values")
    current = np.asarray(current, dtype=float)
    if current.ndim != 2 or current.shape[1] < 2:
        raise ValueError(f"the current path must be [T, ≥2], got shape {current.shape}")
    u_abs = max([abs(float(u)) for u in reference_u] + [abs(float(current_u)), 1e-9])
    traces = []
    for path, u in zip(reference_paths, reference_u):
        path = np.asarray(path, dtype=float)
        traces.append(
            dict(
                type="scatter",
                x=path[:, 0].tolist(),
                y=path[:, 1].tolist(),
                mode="lines",
                name=f"u = {float(u):+.1f}",
                legendgroup="reference",
                line=dict(width=2, color=_u_color(float(u), u_abs)),
                opacity=0.55,
                hovertemplate=f"u = {float(u):+.2f}<br>PC1 %{{x:.3f}}<br>PC2 %{{y:.3f}}<extra></extra>",
            )
        )
    traces.append(
        dict(
            type="scatter",
            x=current[:, 0].tolist(),
            y=current[:, 1].tolist(),
            mode="lines",
            name=f"now: u = {float(current_u):+.2f}",
            line=dict(width=5, color=CURRENT),
            hovertemplate="PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra>now</extra>",
        )
    )
    traces.append(
        dict(
            type="scatter",
            x=[float(current[0, 0]), float(current[-1, 0])],
            y=[float(current[0, 1]), float(current[-1, 1])],
            mode="markers+text",
            text=["τ=0", "τ=1"],
            textposition=["bottom center", "top center"],
            showlegend=False,
            cliponaxis=False,
            hoverinfo="skip",
            marker=dict(
                size=[10, 16],
                symbol=["circle", "star"],
                color=[CURRENT, _u_color(float(current_u), u_abs)],
                line=dict(width=1.5, color=CURRENT),
            ),
        )
    )
    everything = np.concatenate([np.asarray(p, dtype=float)[:, :2] for p in reference_paths] + [current[:, :2]])
    (x_lo, y_lo), (x_hi, y_hi) = everything.min(axis=0), everything.max(axis=0)
    pad_x, pad_y = 0.08 * max(x_hi - x_lo, 1e-6), 0.08 * max(y_hi - y_lo, 1e-6)
    ex = list(explained) if explained is not None else []
    xaxis = dict(
        title=dict(text=f"PC1 ({ex[0]:.0%} of variance)" if len(ex) > 0 else "PC1"),
        range=[float(x_lo - pad_x), float(x_hi + pad_x)],
        zeroline=False,
        automargin=False,
    )
    yaxis = dict(
        title=dict(text=f"PC2 ({ex[1]:.0%} of variance)" if len(ex) > 1 else "PC2"),
        range=[float(y_lo - pad_y), float(y_hi + pad_y)],
        zeroline=False,
        automargin=False,
    )
    return traces, xaxis, yaxis


def steer_figure(
    tokens: Sequence[str],
    probs: Sequence[float],
    reference_paths: Sequence[np.ndarray],
    reference_u: Sequence[float],
    current: np.ndarray,
    current_u: float,
    *,
    explained: Sequence[float] | None = None,
    font_size: int = 14,
    bars_title: str = "Next-token probabilities",
    map_title: str = "Where the flow takes the prompt: H(τ) in the PCA map",
    color: str = POSITIVE,
    height: int | None = 470,
    stations: np.ndarray | None = None,
) -> go.Figure:
    """The Steer page's two views as one figure: next-token bars (left) and the path of H(τ)
    in the PCA map (right; each path is [T, ≥2] in PCA coordinates, τ = 0 first).

    One figure, not two, because the page redraws it on every slider move: the browser's
    share of a move is mostly per-chart work. Margins are fixed (no automatic margins),
    for the same reason; the left one fits about ten characters of token and its percentage.
    """
    bars, bars_x, bars_y = _next_token_bars(tokens, probs, color)
    flow, map_x, map_y = _flow_map(reference_paths, reference_u, current, current_u, explained)
    if stations is not None and len(stations):  # where the solver stood on the current path: its step ends
        stations = np.asarray(stations, dtype=float)
        flow.append(
            dict(
                type="scatter",
                x=stations[:, 0].tolist(),
                y=stations[:, 1].tolist(),
                mode="markers",
                name="solver's step ends",
                marker=dict(size=9, color="#ffffff", line=dict(width=2, color=CURRENT)),
                hovertemplate="a step end<extra></extra>",
            )
        )
    for trace in flow:
        trace.update(xaxis="x2", yaxis="y2")
    layout = style_layout(font_size, height=height)
    layout["margin"] = dict(l=12 * font_size, r=9 * font_size, t=60, b=4 * font_size, autoexpand=False)
    title_font = dict(size=round(font_size * 1.15))
    layout.update(
        xaxis={**bars_x, "domain": [0.0, 0.3], "anchor": "y"},
        yaxis={**bars_y, "anchor": "x"},
        xaxis2={**map_x, "domain": [0.42, 1.0], "anchor": "y2"},
        yaxis2={**map_y, "anchor": "x2"},
        bargap=0.25,
        uirevision="steer-map",
        legend=dict(orientation="v", yanchor="top", y=1, x=1.01, font=dict(size=max(font_size - 2, 10))),
        annotations=[
            dict(
                text=plain_label(t),
                x=x,
                xref="paper",
                xanchor="left",
                y=1.0,
                yref="paper",
                yanchor="bottom",
                yshift=8,
                showarrow=False,
                font=title_font,
            )
            for t, x in ((bars_title, 0.0), (map_title, 0.42))
        ],
    )
    return unvalidated_figure([bars] + flow, layout)


def _u_color(u: float, u_abs: float) -> str:
    """Red for negative u, grey at 0, blue for positive, interpolated in RGB."""
    t = max(-1.0, min(1.0, u / u_abs))
    a, b = (NEUTRAL, POSITIVE) if t >= 0 else (NEUTRAL, NEGATIVE)
    ca, cb = _rgb(a), _rgb(b)
    w = abs(t)
    r, g, bl = (round(ca[i] + (cb[i] - ca[i]) * w) for i in range(3))
    return f"rgb({r},{g},{bl})"


def _rgb(hex_color: str) -> tuple[int, int, int]:
    h = hex_color.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
