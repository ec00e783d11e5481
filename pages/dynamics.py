"""Dynamics: does the learned flow contract, and do Euler and RK4 converge at their orders on it?"""

import numpy as np
import streamlit as st

from lab_ui import models, widgets
from steering.analysis.dynamics import contraction_by_u, convergence
from steering.analysis.inputs import PATH_SOLVER
from steering.analysis.solver_trace import field_geometry
from steering.figures.dynamics import contraction_figure, convergence_figure
from steering.figures.solver_trace import stretching_figure
from steering.lab import logic

header = widgets.page_header(
    "Dynamics of the flow",
    "Second paper: a residual stack is Euler's method on an ODE. If the "
    "field is contractive, nearby paths approach each other (negative λ); Euler's error should "
    "fall like 1/N and RK4's like 1/N⁴.",
    sliders=True,
)
loaded, prompt, control = header.loaded, header.prompt, header.control

st.subheader("Contraction along τ")
QUALITY = {
    "quick": dict(n_tau=9, n_probes=2, lanczos_iterations=8),
    "fine": dict(n_tau=17, n_probes=4, lanczos_iterations=16),
}
quality = st.radio(
    "Resolution",
    tuple(QUALITY),
    horizontal=True,
    key="w_dyn_quality",
    help="Fine: more τ points, perturbation probes and Lanczos iterations (about 4× slower).",
)
u_values = tuple(sorted({-1.5, 0.0, 1.5, round(control[0], 2)}))
contractions = models.analysis(
    loaded,
    "contraction",
    (prompt, u_values, quality),
    contraction_by_u,
    prompt,
    u_values,
    **QUALITY[quality],
    what="the contraction",
)
widgets.plot(widgets.styled(contraction_figure(contractions), height=560), key="contraction")
cols = st.columns(len(contractions))
for col, c in zip(cols, contractions):
    col.metric(
        f"λ(1) at u = {c.u[0]:+.2f}",
        f"{c.ftle[-1]:+.3f}",
        help="Finite-time Lyapunov exponent over the whole block: below 0, perturbations shrink.",
    )

st.subheader("Local stretching rate per u")
st.caption(
    "λ_max((J + Jᵀ)/2) along each u's path: how fast the flow Jacobian's largest singular value grows over a "
    "short step (the one-sided Lipschitz constant). Negative everywhere: the flow contracts in every direction."
)
STRETCH = {"quick": dict(n=9, n_tau=5, lanczos_iterations=8), "fine": dict(n=17, n_tau=9, lanczos_iterations=16)}
spec = STRETCH[quality]
geometry = models.analysis(
    loaded,
    "stretching",
    (prompt, quality),
    lambda model, tok: field_geometry(
        model,
        tok,
        prompt,
        np.round(np.linspace(-2.0, 2.0, spec["n"]), 6),
        n_tau=spec["n_tau"],
        stretching=True,
        lanczos_iterations=spec["lanczos_iterations"],
        solver=PATH_SOLVER,
    ),
    what="the stretching rate",
)
widgets.plot(widgets.styled(stretching_figure(geometry), height=420), key="stretching")
top = float(np.max(geometry.stretching))
st.markdown(
    logic.bold_then_plain(
        "Reading: ",
        f"the largest stretching rate over u and τ is {top:+.3g}: "
        + ("the flow contracts everywhere measured." if top < 0 else "some direction expands somewhere."),
    )
)

st.subheader("Convergence of fixed-step solvers")
conv = models.analysis(
    loaded, "convergence", (prompt, control), convergence, prompt, control, max_steps=64, what="the convergence study"
)
m1, m2, m3 = st.columns(3)
m1.metric("Euler order", f"{conv.euler_order:.2f}", help="Expected 1")
m2.metric("RK4 order", f"{conv.rk4_order:.2f}", help="Expected 4")
m3.metric("Reference NFE (dopri5)", conv.reference_nfe)
widgets.plot(widgets.styled(convergence_figure(conv), height=460), key="convergence")
widgets.download_csv(
    "Download the convergence data (CSV)",
    {"steps": conv.steps.tolist(), "euler_error": conv.euler_error.tolist(), "rk4_error": conv.rk4_error.tolist()},
    "convergence.csv",
    key="csv_convergence",
)
widgets.sync_url("dynamics")
