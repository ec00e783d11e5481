"""Regimes: how much work the adaptive solvers do as u moves, and how it grows with precision."""
import numpy as np
import streamlit as st

import lab_ui as ui
from steering import lab
from steering.analysis.regimes import tolerance_scaling
from steering.figures.regimes import nfe_regimes_figure, tolerance_figure

loaded = ui.model()
ui.sidebar_controls(solver=False)
st.title("Solver regimes")
st.caption("With an adaptive solver the number of field evaluations (NFE) depends on u. The paper finds two "
           "levels, with the switch where the steered sentiment crosses over, and sublinear growth of NFE with "
           "tighter tolerance: a smooth flow.")
ui.show_url_notices()
prompt = ui.prompt_or_stop()

c1, c2, c3, c4 = st.columns(4)
tol = c1.select_slider("Tolerance (rtol = 10·atol)", ui.TOLERANCES, value=1e-3, format_func=lambda t: f"{t:.0e}",
                       key="w_reg_tol")
n_u = c2.select_slider("u values in [−2, 2]", (11, 21, 41, 81), value=41, key="w_reg_n")
positive = c3.text_input("Positive target", " good", max_chars=20, key="w_target_pos")
negative = c4.text_input("Negative target", " bad", max_chars=20, key="w_target_neg")
targets = []
for raw in (positive, negative):
    cleaned = lab.clean_prompt(raw)
    if cleaned.refused:
        st.warning("Both targets need some text; using ' good' and ' bad'.")
        targets = [" good", " bad"]
        break
    targets.append(raw if raw.strip() == cleaned.text else cleaned.text)

grid = np.round(np.linspace(-2.0, 2.0, int(n_u)), 6)
key = (prompt, float(tol), int(n_u), tuple(targets))
bar = st.progress(0.0, text="Solving every u with dopri5 and adaptive_heun…")
regimes = ui.analysis(loaded, "regimes", key, lambda model, tok: lab.regimes_in_chunks(
    model, tok, prompt, grid, rtol=float(tol), atol=float(tol) / 10, targets=tuple(targets),
    on_progress=lambda f: bar.progress(f, text=f"Solving every u… {f:.0%}")), what="the NFE sweep")
bar.empty()

m1, m2, m3, m4 = st.columns(4)
m1.metric("Regime switch", "none" if regimes.switch_u is None else f"u = {regimes.switch_u:+.2f}",
          help="Where dopri5's NFE changes level (best two-level fit).")
m2.metric("Semantic crossover", "none" if regimes.crossover_u is None else f"u = {regimes.crossover_u:+.2f}",
          help="Where the first target's share of the two targets crosses 50 %.")
m3.metric("Solver disagreement", f"{regimes.agreement:.0%}", help="Largest |NFE_a − NFE_b| / mean over u "
          "(the paper: within 15 %).")
m4.metric("Sweep time", f"{regimes.seconds:.2f} s")
ui.plot(ui.styled(nfe_regimes_figure(regimes), height=480), key="regimes")
columns = {"u": regimes.u.tolist()}
for name, values in regimes.nfe.items():
    columns[f"nfe_{name}"] = [int(v) for v in values]
columns["relative_probability_first_target"] = regimes.target_probability.tolist()
ui.download_csv("Download the NFE sweep (CSV)", columns, "nfe_regimes.csv", key="csv_regimes")

st.subheader("Resolution scaling")
ui.sentiment_slider(st, "Sentiment u₁ for this sweep")
u_here = ui.state().control
scaling = ui.analysis(loaded, "tolerance", (prompt, u_here), tolerance_scaling, prompt, u_here,
                      what="the tolerance sweep")
st.metric("log-log slope", f"{scaling.slope:.3f}",
          help=f"NFE ∝ (1/tol)^slope for dopri5 at u = ({u_here[0]:+.2f}, {u_here[1]:+.2f}); below 1 is sublinear.")
ui.plot(ui.styled(tolerance_figure(scaling), height=420), key="tolerance")
ui.download_csv("Download the tolerance sweep (CSV)",
                {"tolerance": scaling.tolerances.tolist(), "nfe": [int(v) for v in scaling.nfe]},
                "tolerance_scaling.csv", key="csv_tolerance")
ui.sync_url("regimes")
