"""Depth lens: the next-token distribution if the flow stopped at τ."""

import streamlit as st

from lab_ui import models, widgets
from steering.analysis.lens import depth_lens
from steering.figures.lens import depth_lens_heatmap, depth_lens_positions_heatmap

header = widgets.page_header(
    "Depth lens",
    "Stop the ODE at depth τ, run the rest of the network on H(τ), and read the "
    "next-token odds. The row at τ = 1 is the model's own prediction.",
    solver=True,
    sliders=True,
)
loaded, prompt, solver, control = header.loaded, header.prompt, header.solver, header.control
c1, c2 = st.columns(2)
n_tau = c1.select_slider("τ points", (5, 9, 11, 17, 33), value=11, key="w_lens_tau")
top_k = c2.select_slider("Top k per τ", (3, 5, 8, 10), value=5, key="w_lens_k")
lens = models.analysis(
    loaded,
    "lens",
    (prompt, control, solver, n_tau, top_k),
    depth_lens,
    prompt,
    control,
    solver,
    n_tau=n_tau,
    top_k=top_k,
    all_positions=True,
    what="the depth lens",
)
widgets.plot(widgets.styled(depth_lens_heatmap(lens), height=140 + 30 * len(lens.shown_tokens)), key="lens")
widgets.plot(
    widgets.styled(depth_lens_positions_heatmap(lens), height=140 + 34 * len(lens.token_strings)), key="lens_positions"
)
columns = {
    "tau": [float(t) for t in lens.tau for _ in lens.shown_tokens],
    "token": [t for _ in lens.tau for t in lens.shown_tokens],
    "probability": [float(p) for row in lens.shown_probs for p in row],
}
widgets.download_csv("Download the lens (CSV)", columns, "depth_lens.csv", key="csv_lens")
widgets.sync_url("lens")
