"""Trajectories: the paths H(τ) of one prompt for a family of controls, on the PCA map, animated over τ."""

import numpy as np
import streamlit as st

from lab_ui import models, widgets
from steering.analysis.bend import fit_bend_map
from steering.analysis.curvature import curvature_of, path_shape_note, token_path_curvature
from steering.analysis.pca import ProjectedPath
from steering.analysis.trajectories import compute_path, pooled
from steering.figures.flow import curvature_figure, pca_paths_figure, token_curvature_figure

header = widgets.page_header(
    "Trajectories through depth",
    "Each line is the prompt's hidden state H(τ) as τ goes 0 → 1 "
    f"through the ODE block, projected on the PCA map, one line per {models.model_texts().names[0]} value "
    "(red negative, blue positive). All paths start at one point: u only acts inside the block.",
    solver=True,
    sliders=True,
)
loaded, prompt, solver, control = header.loaded, header.prompt, header.solver, header.control

c0, c1, c2, c3, c4 = st.columns([1.3, 1, 1, 2, 1])
view = c0.radio(
    "View",
    ("PCA map", "Bend view"),
    horizontal=True,
    key="w_view",
    help="PCA map: where the states lie, fitted once on many prompts; it holds the spread between paths and "
    "can flatten a path's bend. Bend view: fitted on these paths, one axis along their chord and one along "
    "their main departure from it, on equal scales, so the bend is drawn at its true size.",
)
bend_view = view == "Bend view"
dims = c1.radio(
    "Map",
    (2, 3),
    format_func=lambda d: f"{d}-D",
    horizontal=True,
    key="w_dims",
    on_change=widgets.bind("w_dims", "dims", int),
    disabled=bend_view,
    help="The bend view is 2-D." if bend_view else None,
)
dims = 2 if bend_view else dims
n_paths = c2.select_slider("Paths", (3, 5, 9, 17), value=9, key="w_paths")
pca = models.pca_map(loaded)


def tokens_of(traj) -> list[str]:
    every = "all tokens (the whole state)" if bend_view else "all tokens (mean)"
    return [every] + [f"{i}: {t!r}" for i, t in enumerate(traj.token_strings)]


family = np.round(np.linspace(-2.0, 2.0, n_paths), 4)
trajectories = [
    models.analysis(
        loaded,
        "path",
        (prompt, float(u), control[1], solver),
        compute_path,
        prompt,
        (float(u), control[1]),
        solver,
        n_tau=33,
        what="the trajectories",
    )
    for u in family
]
current = models.analysis(
    loaded,
    "path",
    (prompt, control[0], control[1], solver),
    compute_path,
    prompt,
    control,
    solver,
    n_tau=33,
    what="the trajectory at your u",
)
options = tokens_of(current)
which = c3.selectbox(
    "Token",
    range(len(options)),
    format_func=lambda i: options[i],
    key="w_token",
    help="The mean over all tokens (what the map was fitted on; in the bend view, every token's state "
    "together, as the curvature figures below are measured), or one token's own path.",
)
animate = c4.toggle("Animate", value=True, key="w_animate", help="Adds a ▶ play button that grows the paths along τ.")


def states_of(traj, at_stations: bool = False):
    states = traj.stations if at_stations else traj.states
    if which == 0:
        return states if bend_view else states.mean(axis=1)
    return states[:, which - 1]


def drawn(traj, u: float, name: str = "") -> ProjectedPath:
    """The continuous path with the solver's step ends marked on it."""
    stations = project(states_of(traj, at_stations=True))
    return ProjectedPath(name=name, u=float(u), tau=traj.tau, points=project(states_of(traj)), stations=stations)


bend = fit_bend_map([states_of(t) for t in trajectories]) if bend_view else None
project = bend.project if bend_view else pca.project
paths = [drawn(t, u) for u, t in zip(family, trajectories)]
mine = drawn(current, control[0], name="your u")
fig = pca_paths_figure(
    paths,
    dims=dims,
    explained_variance=pca.explained_variance_ratio,
    animate=animate,
    highlight=[mine],
    title=f"H(τ) for u from −2 to +2; dots: {current.solver_label}'s step ends; black: u = {control[0]:+.2f}",
    titles=["along the paths' chord", "along their main departure from it"] if bend_view else None,
    equal_scale=bend_view,
)
if animate:  # play/pause above the plot, the τ slider alone below it
    fig.layout.updatemenus[0].update(
        x=1.0, y=1.08, xanchor="right", yanchor="bottom", direction="left", pad=dict(t=0, r=0)
    )
    fig.layout.sliders[0].update(x=0.0, len=1.0, pad=dict(t=50, b=10))
widgets.plot(widgets.styled(fig, height=660 if dims == 3 else 600), key="paths")
st.caption(
    f"Lines: the continuous flow ({current.line_label}). White dots: where {current.solver_label} stood, its step "
    "ends; the model's output is computed from those."
)
if bend_view:
    held = "n/a (the paths are straight)" if np.isnan(bend.bend_captured) else f"{bend.bend_captured:.0%}"
    st.caption(
        "Fitted on these paths: x along the mean of their chords H(1) − H(0), y along the main direction of "
        f"their departures from their own chords (it holds {held} of those departures), one scale on both axes."
    )
else:
    st.caption(
        f"Explained variance of the map: "
        f"{', '.join(f'PC{i + 1} {v:.1%}' for i, v in enumerate(pca.explained_variance_ratio))}. "
        f"The map was fitted once on mean-token paths of {len(pca.prompts)} reference prompts."
    )

columns = ("x", "y") if bend_view else ("pc1", "pc2", "pc3")
rows = {"u": [], "tau": [], **{column: [] for column in columns}}
for path in paths + [mine]:
    for t, p in zip(path.tau, path.points):
        rows["u"].append(float(path.u))
        rows["tau"].append(float(t))
        for k, column in enumerate(columns):
            rows[column].append(float(p[k]) if k < len(p) else float("nan"))
widgets.download_csv("Download these paths (CSV)", rows, "trajectories.csv", key="csv_paths")

st.subheader("How curved are these paths?")
on_map = [pca.project(pooled(t) if which == 0 else t.states[:, which - 1]) for t in trajectories]
curvature = curvature_of(trajectories, on_map)
top = curvature.most_curved()
note = path_shape_note(loaded.config)


def shown(value, pattern):
    return "n/a" if value is None else pattern.format(value)


c1, c2, c3, c4 = st.columns(4)
c1.metric(
    "Largest arc / chord − 1",
    shown(top["arc_to_chord_excess"], "{:.1e}"),
    help="Arc length Σ|ΔH| over chord |H(1) − H(0)|, in full space (every token's state together); 1 is a "
    "straight line, so this is how much longer than straight the longest path is. " + note,
)
c2.metric(
    "Largest share ⟂ chord",
    shown(top["orthogonal_share"], "{:.2%}"),
    help=f"At u = {shown(top['orthogonal_share_u'], '{:+.2f}')}: the widest the displacement H(τ) − H(0) ever "
    "turns from the chord, as the share of it orthogonal to the chord (the sine of that angle); 0 is "
    "straight. " + note,
)
c4.metric(
    "In the bend view",
    shown(top["orthogonal_share_bend"], "{:.2%}"),
    help="The same share for the whole state's paths in the bend view (every token together, as in full space).",
)
c3.metric(
    "On the PCA map",
    shown(top["orthogonal_share_map"], "{:.2%}"),
    help="The same share for the token chosen above, projected on the PCA map. With a fixed-step "
    "solver the path between its steps is drawn straight (linear interpolation): pick dopri5 in the "
    "sidebar to see the continuous path.",
)
widgets.plot(widgets.styled(curvature_figure(curvature), height=380), key="curvature")
st.caption(note)

# each token's own path at your u: the mean path above can be straight while single tokens turn
excess = token_path_curvature(current.states) - 1.0
widgets.plot(
    widgets.styled(
        token_curvature_figure(current.token_strings, excess, which - 1 if which else None, control[0]), height=340
    ),
    key="token_curvature",
)
st.caption(
    f"Median over the prompt's tokens: {np.median(excess):.3g}; the token picked above: "
    + (f"{excess[which - 1]:.3g}." if which else "pick one in the Token box to mark it.")
)
widgets.sync_url("trajectories")
