"""Solvers: a fixed-step solver against an adaptive one on the same prompt and control."""

import streamlit as st

from lab_ui import models, widgets
from steering.analysis.pca import ProjectedPath
from steering.analysis.solvers import compare_solvers
from steering.analysis.trajectories import pooled
from steering.figures.flow import pca_paths_figure
from steering.figures.solvers import divergence_figure, eval_points_figure
from steering.lab import logic
from steering.model.ode import ADAPTIVE_SOLVERS, FIXED_SOLVERS, SolverConfig

header = widgets.page_header(
    "Fixed vs adaptive solvers",
    "The same prompt and control, integrated by a few fixed steps "
    "(how the model was trained) and by an adaptive solver at tight tolerance. The paper reports "
    "0.068 % final divergence for 4 Euler steps against dopri5.",
    sliders=True,
)
loaded, prompt, control = header.loaded, header.prompt, header.control

left, right = st.columns(2, gap="large")
with left:
    st.markdown("**Solver A (fixed steps)**")
    a1, a2 = st.columns(2)
    method_a = a1.selectbox("Method", FIXED_SOLVERS, key="w_a_method")
    steps_a = a2.number_input("Steps", logic.STEPS_MIN, logic.STEPS_MAX, 4, key="w_a_steps")
with right:
    st.markdown("**Solver B (adaptive, the reference)**")
    b1, b2 = st.columns(2)
    method_b = b1.selectbox("Method", ADAPTIVE_SOLVERS, key="w_b_method")
    tol_b = b2.select_slider(
        "Tolerance", widgets.TOLERANCES, value=1e-7, format_func=lambda t: f"{t:.0e}", key="w_b_tol"
    )
solver_a = SolverConfig(method_a, steps=int(steps_a))
solver_b = SolverConfig(method_b, rtol=float(tol_b), atol=float(tol_b) / 100)
comparison = models.analysis(
    loaded,
    "compare",
    (prompt, control, solver_a, solver_b),
    compare_solvers,
    prompt,
    control,
    solver_a,
    solver_b,
    n_tau=33,
    what="the solver comparison",
)

m1, m2, m3 = st.columns(3)
m1.metric("Final divergence at τ = 1", f"{comparison.final_divergence:.4%}", help="||H_A(1) − H_B(1)|| / ||H_B(1)||")
m2.metric(f"NFE of A ({solver_a.label()})", comparison.a.nfe)
m3.metric(f"NFE of B ({method_b})", comparison.b.nfe)

col1, col2 = st.columns(2, gap="large")
with col1:
    widgets.plot(
        widgets.styled(divergence_figure(comparison, title="Divergence of A from B along τ"), height=430),
        key="divergence",
    )
with col2:
    pca = models.pca_map(loaded)
    paths = [
        ProjectedPath(name=t.solver_label, u=control[0], tau=t.tau, points=pca.project(pooled(t)))
        for t in (comparison.a, comparison.b)
    ]
    fig = pca_paths_figure(
        paths[1:],
        dims=2,
        explained_variance=pca.explained_variance_ratio,
        highlight=paths[:1],
        title="Both paths on the PCA map (A black)",
    )
    widgets.plot(widgets.styled(fig, height=430), key="paths_ab")
widgets.plot(widgets.styled(eval_points_figure([comparison.a, comparison.b]), height=330), key="eval_points")
st.caption(
    "Dots: every τ where the solver evaluated the field. Green bars: starts of accepted steps; red ×: "
    "rejected steps. Adaptive solvers may evaluate past τ = 1 and interpolate back."
)
widgets.download_csv(
    "Download the divergence along τ (CSV)",
    {"tau": comparison.tau.tolist(), "divergence": comparison.divergence.tolist()},
    "divergence.csv",
    key="csv_divergence",
)
widgets.sync_url("solvers")
