"""Paths through hidden-state space on the PCA map, and probe accuracy along depth.

Inputs are plain data: each path is any object with `name`, `u`, `tau` [T] and `points`
[T, >=2 or 3] (steering.analysis.pca.ProjectedPath fits).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

U_COLORSCALE = "RdBu"  # red for negative control, blue for positive


def u_colors(values, low: float | None = None, high: float | None = None) -> list[str]:
    values = np.asarray(values, dtype=float)
    low = float(values.min()) if low is None else low
    high = float(values.max()) if high is None else high
    span = high - low
    positions = np.full(len(values), 0.5) if span == 0 else np.clip((values - low) / span, 0, 1)
    return sample_colorscale(U_COLORSCALE, positions.tolist())


def _path_trace(path, color: str, dims: int, upto: int | None = None, width: float = 2.0):
    pts = np.asarray(path.points)[: upto if upto is not None else None]
    tau = np.asarray(path.tau)[: len(pts)]
    label = f"{path.name} (u={path.u:+.2f})" if path.name else f"u={path.u:+.2f}"
    hover = [f"{label}<br>τ={t:.3f}" for t in tau]
    common = dict(
        mode="lines+markers",
        name=label,
        line=dict(color=color, width=width),
        marker=dict(size=3, color=color),
        hovertext=hover,
        hoverinfo="text",
    )
    if dims == 3:
        return go.Scatter3d(x=pts[:, 0], y=pts[:, 1], z=pts[:, 2], **common)
    return go.Scatter(x=pts[:, 0], y=pts[:, 1], **common)


def _stations_trace(path, color: str, dims: int):
    """The solver's step ends on a path (the line between them is a fine solve of the same flow)."""
    pts = np.asarray(path.stations, dtype=float)
    common = dict(
        mode="markers",
        name="solver's step ends",
        legendgroup="stations",
        showlegend=False,
        marker=dict(symbol="circle", size=7, color="white", line=dict(width=2, color=color)),
        hovertext=[f"u={path.u:+.2f}: a step end" for _ in pts],
        hoverinfo="text",
    )
    if dims == 3:
        return go.Scatter3d(x=pts[:, 0], y=pts[:, 1], z=pts[:, 2], **common)
    return go.Scatter(x=pts[:, 0], y=pts[:, 1], **common)


def _start_trace(paths, dims: int):
    starts = np.array([np.asarray(p.points)[0] for p in paths])
    common = dict(mode="markers", name="τ = 0", marker=dict(symbol="circle-open", size=9, color="black"))
    if dims == 3:
        return go.Scatter3d(x=starts[:, 0], y=starts[:, 1], z=starts[:, 2], **common)
    return go.Scatter(x=starts[:, 0], y=starts[:, 1], **common)


def axis_titles(explained_variance=None, n: int = 3) -> list[str]:
    if explained_variance is None:
        return [f"PC{i + 1}" for i in range(n)]
    return [f"PC{i + 1} ({100 * float(v):.1f}% var.)" for i, v in enumerate(list(explained_variance)[:n])]


def pca_paths_figure(
    paths,
    dims: int = 2,
    explained_variance=None,
    animate: bool = False,
    highlight=None,
    title: str = "Hidden-state paths H̄(τ) on the PCA map",
    titles: list[str] | None = None,
    equal_scale: bool = False,
) -> go.Figure:
    """One line per path, coloured by u (red negative, blue positive), τ = 0 circled.

    highlight: extra paths drawn thick in black on top (e.g. the user's own prompt).
    animate: frames that grow every path along τ, with a play button.
    titles: the axes' titles (default: PC1, PC2, ... with explained_variance).
    equal_scale: one unit is as long on both 2-D axes, so a bend is drawn at its true size.
    """
    if dims not in (2, 3):
        raise ValueError("dims must be 2 or 3")
    paths = list(paths)
    highlight = list(highlight or [])
    if not paths and not highlight:
        raise ValueError("no paths to draw")
    everything = paths + highlight
    for p in everything:
        if np.asarray(p.points).shape[-1] < dims:
            raise ValueError(f"paths have {np.asarray(p.points).shape[-1]} coordinates; {dims} needed")
    colors = u_colors([p.u for p in paths]) if paths else []
    colors += ["black"] * len(highlight)
    widths = [2.0] * len(paths) + [5.0] * len(highlight)
    fig = go.Figure([_path_trace(p, c, dims, width=w) for p, c, w in zip(everything, colors, widths)])
    fig.add_trace(_start_trace(everything, dims))
    for p, c in zip(everything, colors):
        if getattr(p, "stations", None) is not None:
            fig.add_trace(_stations_trace(p, c, dims))
    titles = list(titles) if titles is not None else axis_titles(explained_variance, dims)
    if equal_scale and dims == 2:
        fig.update_yaxes(scaleanchor="x", scaleratio=1)
    if dims == 3:
        fig.update_layout(scene=dict(xaxis_title=titles[0], yaxis_title=titles[1], zaxis_title=titles[2]))
    else:
        fig.update_layout(xaxis_title=titles[0], yaxis_title=titles[1])
    fig.update_layout(title=title, legend_title_text="path")
    if animate:
        n_tau = min(len(np.asarray(p.tau)) for p in everything)
        tau = np.asarray(everything[0].tau)
        fig.frames = [
            go.Frame(
                data=[_path_trace(p, c, dims, upto=k + 1, width=w) for p, c, w in zip(everything, colors, widths)],
                traces=list(range(len(everything))),
                name=f"{tau[k]:.3f}",
            )
            for k in range(n_tau)
        ]
        fig.update_layout(
            updatemenus=[
                dict(
                    type="buttons",
                    showactive=False,
                    x=0.0,
                    y=-0.12,
                    xanchor="left",
                    buttons=[
                        dict(
                            label="▶ play",
                            method="animate",
                            args=[None, dict(frame=dict(duration=120, redraw=dims == 3), fromcurrent=True)],
                        ),
                        dict(
                            label="❚❚ pause",
                            method="animate",
                            args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate")],
                        ),
                    ],
                )
            ],
            sliders=[
                dict(
                    currentvalue=dict(prefix="τ = "),
                    pad=dict(t=40),
                    steps=[
                        dict(
                            label=f.name,
                            method="animate",
                            args=[[f.name], dict(mode="immediate", frame=dict(duration=0, redraw=dims == 3))],
                        )
                        for f in fig.frames
                    ],
                )
            ],
        )
    return fig


def probes_figure(probes, title: str = "Sentiment separability of H̄(τ) (held-out linear probe)") -> go.Figure:
    """Held-out (and train) accuracy against τ, with the chance level."""
    taus = np.asarray(probes.taus, dtype=float)
    fig = go.Figure(
        [
            go.Scatter(x=taus, y=np.asarray(probes.accuracy), mode="lines+markers", name="held-out accuracy"),
            go.Scatter(
                x=taus,
                y=np.asarray(probes.train_accuracy),
                mode="lines+markers",
                name="train accuracy",
                line=dict(dash="dot"),
            ),
            go.Scatter(
                x=[0.0, 1.0], y=[probes.chance] * 2, mode="lines", name="chance", line=dict(color="gray", dash="dash")
            ),
        ]
    )
    fig.update_layout(title=title, xaxis_title="depth τ", yaxis_title="accuracy", yaxis_range=[0, 1.02])
    return fig


def curvature_figure(curvature, title: str = "How curved are the paths?") -> go.Figure:
    """Arc / chord - 1 (left, log axis) and the largest orthogonal share of the displacement (right)
    against u, in full space, on the PCA map and in the bend view.

    curvature: an object with u, arc_to_chord, orthogonal_share and, optionally, arc_to_chord_map,
    orthogonal_share_map, arc_to_chord_bend and orthogonal_share_bend (steering.analysis.curvature.Curvature
    fits). A perfectly straight
    path has arc / chord - 1 = 0, which a log axis leaves out.
    """
    u = np.asarray(curvature.u, dtype=float)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("arc / chord − 1 (0: straight)", "largest share of the displacement ⟂ chord")
    )
    series = [
        ("full space", curvature.arc_to_chord, curvature.orthogonal_share, "solid"),
        (
            "PCA map",
            getattr(curvature, "arc_to_chord_map", None),
            getattr(curvature, "orthogonal_share_map", None),
            "dot",
        ),
        (
            "bend view",
            getattr(curvature, "arc_to_chord_bend", None),
            getattr(curvature, "orthogonal_share_bend", None),
            "dash",
        ),
    ]
    for k, (name, ratio, share, dash) in enumerate(series):
        if ratio is None or share is None:
            continue
        color = ("#1f6fb4", "#e67e22", "#2ca02c")[k]
        fig.add_trace(
            go.Scatter(
                x=u,
                y=np.asarray(ratio, dtype=float) - 1.0,
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=color, dash=dash),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=u,
                y=np.asarray(share, dtype=float),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=False,
                line=dict(color=color, dash=dash),
            ),
            row=1,
            col=2,
        )
    fig.update_yaxes(type="log", exponentformat="e", row=1, col=1)
    fig.update_yaxes(tickformat=".2%", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text=f"control u ({getattr(curvature, 'axis', 'sentiment')})")
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.2))
    return fig


def token_curvature_figure(tokens: list[str], excess, chosen: int | None = None, u: float = 0.0) -> go.Figure:
    """Each prompt token's own path: arc / chord − 1 in full space (0: straight), one bar a token;
    the token picked for the map (chosen, an index into tokens) drawn darker."""
    excess = np.asarray(excess, dtype=float)
    colors = ["#1f6fb4" if i == chosen else "#9cc3e6" for i in range(len(tokens))]
    fig = go.Figure(
        go.Bar(
            x=list(range(len(tokens))),
            y=excess,
            marker_color=colors,
            hovertext=[f"{i}: {t!r}" for i, t in enumerate(tokens)],
            hoverinfo="text+y",
        )
    )
    fig.update_layout(
        title=f"Each token's path at u = {u:+.2f}: arc / chord − 1 (median {np.median(excess):.3g})",
        xaxis=dict(title="token", tickmode="array", tickvals=list(range(len(tokens))), ticktext=list(tokens)),
        yaxis_title="arc / chord − 1",
        showlegend=False,
    )
    return fig
