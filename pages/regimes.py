"""Regimes: how much work the adaptive solvers do as u moves, and how it grows with precision."""

import numpy as np
import streamlit as st

from lab_ui import models, widgets
from steering.analysis.alignment import regimes_over_prompts
from steering.analysis.inputs import PATH_SOLVER, REFERENCE_SOLVER
from steering.analysis.regime_names import regimes_reading
from steering.analysis.regimes import tolerance_scaling
from steering.analysis.regimes_map import FLOAT32_NOTE, PAST_END_NOTE, default_tolerance_reading, regimes_map
from steering.analysis.solver_trace import field_geometry, neighbour_across_switch, solver_traces, trace_reading
from steering.data.heldout import PROBE_PROMPT_VARIANTS
from steering.figures.regimes import alignment_figure, nfe_regimes_figure, tolerance_figure
from steering.figures.regimes_map import regimes_map_figure
from steering.figures.solver_trace import field_heatmaps_figure, step_trace_figure
from steering.lab import compute, logic
from steering.model.ode import SolverConfig

texts = models.model_texts()  # the model's first axis, its probe targets and prompts (sentiment for the shipped one)
header = widgets.page_header(
    "Solver regimes",
    "With an adaptive solver the number of field evaluations (NFE) depends on "
    f"u. The paper finds two levels, with the switch where the steered {texts.names[0]} crosses over, and "
    "sublinear growth of NFE with tighter tolerance: a smooth flow. Here every switch is found (an "
    "exact piecewise-constant fit of dopri5's NFE against u) and the alignment is tested over ten "
    "prompts against chance.",
)
loaded, prompt = header.loaded, header.prompt
widgets.sync_url("regimes")  # first: the map and the sweeps below take seconds, and nothing below changes the state

st.subheader("The regimes map: NFE over u and tolerance")
st.caption(
    "Each cell is one dopri5 solve (rtol = t, atol = t/10, landing on τ = 1, in float64 on a copy of the field; "
    "every u of a row solved at once, each on its own steps) at 41 u × 25 tolerances, plus the middle of each band. "
    "Its reason: cap-limited (no mark: no step rejected, every step grew by torchdiffeq's 10× "
    "cap, so the first step h sets the count, 2 + 6k with k the steps h, 10·h, … need to reach τ = 1), "
    "error-limited (○: the error held a step's growth under the cap) or rejected (×). The dotted lines bound the "
    "tolerances where the first-step rule splits NFE over u into two levels; the slider under the map picks the "
    "tolerance drawn beneath, with h(u) against its thresholds 1/11, 1/111, …"
)
past_end = False
if getattr(loaded.model.config, "field_basis", 0):  # a depth field: its weights past τ = 1 are extrapolated
    past_end = st.toggle(
        "Step past τ = 1 and interpolate back (torchdiffeq's default), for comparison",
        key="w_reg_past_end",
        help=PAST_END_NOTE,
    )
    if past_end:
        st.caption(PAST_END_NOTE)
in_float32 = st.toggle(
    "Solve in float32, the model's own precision, for comparison",
    key="w_reg_float32",
    help=FLOAT32_NOTE,
)
if in_float32:
    st.caption(FLOAT32_NOTE)
precision = "float32" if in_float32 else "float64"
job = models.background(
    loaded,
    "regimes_map",
    (prompt, past_end, precision),
    lambda model, tok, on_progress: regimes_map(
        model,
        tok,
        prompt,
        past_end=past_end,
        precision=precision,
        targets=texts.probe_targets,  # the crossover the switches are compared with: the model's own probe words
        on_progress=on_progress,
    ),
    what="the regimes map",
)


@st.fragment(run_every=1.0)
def _map_progress():
    if job.done:
        st.rerun()
    st.progress(job.progress, text=f"Solving the map in the background (41 u × 25 tolerances)… {job.progress:.0%}")


if not job.done:
    _map_progress()
elif job.error:
    st.error(logic.escape_markdown(job.error))
else:
    pmap = job.result
    st.markdown(
        logic.bold_then_plain("What sets the level at the default tolerance: ", default_tolerance_reading(pmap))
    )
    st.markdown(logic.bold_then_plain("The regimes, named from the map's counts: ", regimes_reading(pmap)))
    band_rows = dict(zip(pmap.band_rows, pmap.cap_bands))
    if st.session_state.get("w_reg_map_for") != (prompt, past_end, precision):
        st.session_state["w_reg_map_for"] = (prompt, past_end, precision)
        st.session_state["w_reg_map_row"] = pmap.row(1e-3)
    if band_rows:
        first_row, band = next(iter(band_rows.items()))
        if st.button(
            f"Jump to the band's middle (t = {band.t_middle:.3g}), where the two regimes show",
            key="w_reg_map_jump",
        ):
            st.session_state["w_reg_map_row"] = first_row
    widgets.plot(
        widgets.styled(regimes_map_figure(pmap, st.session_state["w_reg_map_row"]), height=900), key="regimes_map"
    )
    st.dataframe(
        [
            {
                "kind": b.kind,
                "t from": float(f"{b.t_low:.4g}"),
                "t to": float(f"{b.t_high:.4g}"),
                "edges": "bisection on t" if b.bisected else "grid rows",
                "NFE levels": "/".join(str(v) for v in b.levels),
                "switch u": ", ".join(f"{x:+.2f}" for x in b.switch_u),
                "predicted switch u": ""
                if b.predicted_switch_u is None
                else ", ".join(f"{x:+.2f}" for x in b.predicted_switch_u),
            }
            for b in pmap.bands
        ],
        hide_index=True,
        width="stretch",
    )
    if pmap.why_no_band:
        st.markdown(logic.bold_then_plain("No band of the first-step rule: ", pmap.why_no_band))
    if pmap.exceptions:
        st.warning(f"{len(pmap.exceptions)} cap-limited cells take another count than the first-step rule's.")
    st.caption(f"{pmap.solves} solves in {pmap.seconds:.1f} s, in {pmap.precision}.")

st.subheader("NFE against u at one tolerance, both solvers")

c1, c2, c3, c4 = st.columns(4)
tol = c1.select_slider(
    "Tolerance (rtol = 10·atol)", widgets.TOLERANCES, value=1e-3, format_func=lambda t: f"{t:.0e}", key="w_reg_tol"
)
n_u = c2.select_slider("u values in [−2, 2]", (11, 21, 41, 81), value=41, key="w_reg_n")
default_pos, default_neg = texts.probe_targets
positive = c3.text_input("Positive target", default_pos, max_chars=20, key="w_target_pos")
negative = c4.text_input("Negative target", default_neg, max_chars=20, key="w_target_neg")
targets = []
for raw in (positive, negative):
    cleaned = logic.clean_prompt(raw)
    if cleaned.refused:
        st.warning(f"Both targets need some text; using {default_pos!r} and {default_neg!r}.")
        targets = [default_pos, default_neg]
        break
    targets.append(raw if raw.strip() == cleaned.text else cleaned.text)

grid = np.round(np.linspace(-2.0, 2.0, int(n_u)), 6)
key = (prompt, float(tol), int(n_u), tuple(targets))
bar = st.progress(0.0, text="Solving every u with dopri5 and adaptive_heun…")
regimes = models.analysis(
    loaded,
    "regimes",
    key,
    lambda model, tok: compute.regimes_in_chunks(
        model,
        tok,
        prompt,
        grid,
        rtol=float(tol),
        atol=float(tol) / 10,
        targets=tuple(targets),
        chunks=1,  # every u in one batched solve per solver (float64): about a second or two on the shipped model
        on_progress=lambda f: bar.progress(f, text=f"Solving every u… {f:.0%}"),
    ),
    what="the NFE sweep",
)
bar.empty()

st.markdown(logic.bold_then_plain("Reading: ", regimes.reading))
m1, m2, m3, m4, m5 = st.columns(5)
methods = list(regimes.nfe)
pair = " vs ".join(methods[:2])
m1.metric(
    "Step-count disagreement",
    f"{regimes.step_disagreement:.0%}",
    help=f"Largest |steps_a − steps_b| / mean(steps_a, steps_b) over u, accepted steps of {pair} "
    "(the paper: within 15 %). 0 % means the two solvers take the same number of steps everywhere.",
)
m2.metric(
    "NFE disagreement",
    f"{regimes.nfe_disagreement:.0%}",
    help=f"The same on raw NFE. Solvers spend different numbers of evaluations per step ({pair}), so raw "
    "NFE differ even where the steps agree: the step count is the fair comparison.",
)
m3.metric(
    "Regime switches",
    str(len(regimes.switches)) if regimes.switches else "none",
    help="Where dopri5's NFE changes level, by an exact penalised piecewise-constant fit: "
    + (
        "; ".join(f"u = {s.u:+.2f} ({s.from_level:g} → {s.to_level:g} NFE)" for s in regimes.switches)
        or "one level everywhere"
    )
    + ".",
)
m4.metric(
    "Semantic crossover",
    "none" if regimes.crossover_u is None else f"u = {regimes.crossover_u:+.2f}",
    help="Where the first target's share of the two targets crosses 50 %"
    + (
        ""
        if regimes.crossover_to_switch is None
        else f"; {regimes.crossover_to_switch:.2f} from the nearest switch (u = {regimes.switch_u:+.2f})"
    )
    + ".",
)
m5.metric("Sweep time", f"{regimes.seconds:.2f} s")
event = widgets.plot(widgets.styled(nfe_regimes_figure(regimes), height=480), key="regimes", on_select="rerun")
columns = {"u": regimes.u.tolist()}
for name, values in regimes.nfe.items():
    columns[f"nfe_{name}"] = [int(v) for v in values]
for name, values in regimes.steps.items():
    columns[f"steps_{name}"] = [int(v) for v in values]
columns["relative_probability_first_target"] = regimes.target_probability.tolist()
widgets.download_csv("Download the NFE sweep (CSV)", columns, "nfe_regimes.csv", key="csv_regimes")

config = SolverConfig("dopri5", rtol=float(tol), atol=float(tol) / 10)
sweep_traces = models.analysis(
    loaded,
    "solver_trace_sweep",
    (prompt, float(tol), int(n_u)),
    lambda model, tok: solver_traces(model, tok, prompt, grid, config),
    what="what sets the levels",
)
if sweep_traces is not None:
    st.markdown(logic.bold_then_plain("What sets the level: ", sweep_traces.levels_reading()))

st.subheader("Why this many steps? The step trace at one u and its neighbour")
st.caption(
    "Every step dopri5 attempts at this tolerance: where it starts (τ), its size h and its error ratio (the "
    "embedded error estimate against rtol·|H| + atol; above 1 the step is rejected, marked ×). Its first step is "
    "a guess from the field at τ = 0, and each step may grow at most 10× the one before. Pick a u with the "
    "slider or by clicking a point of the NFE plot; its neighbour is the nearest u on the other side of a switch "
    "(the next u when there is no switch)."
)
u_values = [float(v) for v in regimes.u]
picked = [p.get("x") for p in (getattr(getattr(event, "selection", None), "points", None) or [])]
if picked and picked[0] is not None and picked != st.session_state.get("regimes_last_click"):
    st.session_state["regimes_last_click"] = picked
    st.session_state["w_reg_trace_u"] = min(u_values, key=lambda v: abs(v - float(picked[0])))
if st.session_state.get("w_reg_trace_u") not in u_values:
    st.session_state["w_reg_trace_u"] = min(u_values, key=lambda v: abs(v - widgets.state().control[0]))
u_trace = st.select_slider("u for the step trace", u_values, key="w_reg_trace_u", format_func=lambda v: f"{v:+.2f}")
here = u_values.index(u_trace)
first_nfe = regimes.nfe[methods[0]]
there = neighbour_across_switch(first_nfe, here)
pair_u = [u_trace] + ([] if there is None else [u_values[there]])
traces = models.analysis(
    loaded,
    "solver_trace",
    (prompt, tuple(pair_u), float(tol)),
    lambda model, tok: solver_traces(model, tok, prompt, sorted(pair_u), config),
    what="the step trace",
)
if traces is not None:
    ordered = sorted(traces.traces, key=lambda t: abs(float(t.u[0]) - u_trace))
    for trace in ordered:
        st.markdown(logic.bold_then_plain(f"u = {float(trace.u[0]):+.2f}: ", trace_reading(trace)))
    widgets.plot(widgets.styled(step_trace_figure(ordered), height=520), key="step_trace")

st.subheader("Speed, turn and stretching of the field over (u, τ)")
st.caption(
    "Along each u's path: the field's speed |α·F| (mean over tokens), how fast it turns, "
    "|dF̂/dτ| in radians per unit depth (mean over tokens), and the local stretching rate λ_max((J + Jᵀ)/2), "
    "the growth rate of the flow Jacobian's largest singular value (negative: the flow contracts there)."
)
GEOMETRY = {
    "quick": dict(n=9, n_tau=5, lanczos_iterations=8, solver=PATH_SOLVER),
    "fine": dict(n=41, n_tau=17, lanczos_iterations=20, solver=REFERENCE_SOLVER),
}
detail = st.radio(
    "Resolution",
    tuple(GEOMETRY),
    horizontal=True,
    key="w_reg_geometry",
    help="Quick: 9 u × 5 τ on 8 RK4 steps' path, 8 Lanczos iterations. Fine: 41 u × 17 τ on dopri5's path "
    "(rtol 1e-7), 20 iterations; about 30× slower.",
)
spec = GEOMETRY[detail]
geometry = models.analysis(
    loaded,
    "field_geometry",
    (prompt, detail),
    lambda model, tok: field_geometry(
        model,
        tok,
        prompt,
        np.round(np.linspace(-2.0, 2.0, spec["n"]), 6),
        n_tau=spec["n_tau"],
        stretching=True,
        lanczos_iterations=spec["lanczos_iterations"],
        solver=spec["solver"],
    ),
    what="the field along the paths",
)
if geometry is not None:
    widgets.plot(widgets.styled(field_heatmaps_figure(geometry), height=440), key="field_heatmaps")

n_prompts = f"{len(texts.prompts)} prompts" if texts.user_model else "Ten prompts"  # a user model: its openings
st.subheader(f"Does the crossover sit on a switch? {n_prompts} against chance")
st.caption(
    "The paper's claim: the NFE switch is aligned with the semantic crossover. For each of the "
    "evaluation's ten probe prompts, at this tolerance, grid and targets: its switches, its crossover and "
    "the distance between the crossover and the nearest switch; aligned means at most 0.1. The shuffled-u "
    "null moves each crossover to a random u in [−2, 2] (its own switches kept, 2,000 draws); the swapped "
    "null pairs each crossover with the other prompts' switches."
)
bar = st.progress(0.0, text="Solving every u for each probe prompt…")
alignment = models.analysis(
    loaded,
    "alignment",
    (float(tol), int(n_u), tuple(targets)),
    lambda model, tok: regimes_over_prompts(
        model,
        tok,
        texts.prompts if texts.user_model else PROBE_PROMPT_VARIANTS,
        grid,
        rtol=float(tol),
        atol=float(tol) / 10,
        targets=tuple(targets),
        prompt_set="probe",
        on_progress=lambda f: bar.progress(f, text=f"Probe prompts… {f:.0%}"),
        precision="float64",  # batched, as the sweep above: ten prompts in seconds, not minutes
    ),
    what="the alignment over the probe prompts",
)
bar.empty()
stats = alignment.stats


def share(x):
    return "n/a" if x is None else f"{x:.0%}"


def dist(x):
    return "n/a" if x is None else f"{x:.2f}"


a1, a2, a3 = st.columns(3)
a1.metric(
    "Aligned (distance ≤ 0.1)",
    share(stats["aligned_share"]),
    delta=None
    if stats["aligned_share"] is None
    else f"{stats['aligned_share'] - stats['null_aligned_share']:+.0%} vs a random crossover",
    delta_color="off",
    help=f"Of {stats['n_with_crossover']} prompts whose target share crosses 50 % on the grid. "
    f"Shuffled-u null: {share(stats['null_aligned_share'])} (p = {dist(stats['p_aligned_share'])}); "
    f"swapped null: {share(stats['swapped_aligned_share'])}.",
)
a2.metric(
    "Median distance to a switch",
    dist(stats["median_distance"]),
    help=f"Shuffled-u null: {dist(stats['null_median_distance'])} (p = {dist(stats['p_median_distance'])}, "
    f"the share of random draws at least this close); swapped null: "
    f"{dist(stats['swapped_median_distance'])}.",
)
a3.metric(
    "Prompts",
    f"{stats['n_measured']} / {stats['n_prompts']}",
    help="Prompts with both a crossover and at least one switch, of all probe prompts.",
)
widgets.plot(
    widgets.styled(alignment_figure(alignment), height=max(360, 70 + 36 * len(alignment.prompts))), key="alignment"
)
st.dataframe(
    [
        {
            "prompt": row.prompt,
            "switches": ", ".join(f"{s.u:+.2f}" for s in row.switches) or "none",
            "crossover": None if row.crossover_u is None else round(row.crossover_u, 3),
            "distance": None if row.distance is None else round(row.distance, 3),
            "aligned": row.aligned,
        }
        for row in alignment.prompts
    ],
    hide_index=True,
    width="stretch",
)

st.subheader("Resolution scaling")
widgets.sentiment_slider(st, f"{texts.short_label(0)} for this sweep")
u_here = widgets.state().control
scaling = models.analysis(
    loaded, "tolerance", (prompt, u_here), tolerance_scaling, prompt, u_here, what="the tolerance sweep"
)
st.metric(
    "log-log slope",
    f"{scaling.slope:.3f}",
    help=f"NFE ∝ (1/tol)^slope for dopri5 at u = ({u_here[0]:+.2f}, {u_here[1]:+.2f}); below 1 is sublinear.",
)
widgets.plot(widgets.styled(tolerance_figure(scaling), height=420), key="tolerance")
widgets.download_csv(
    "Download the tolerance sweep (CSV)",
    {"tolerance": scaling.tolerances.tolist(), "nfe": [int(v) for v in scaling.nfe]},
    "tolerance_scaling.csv",
    key="csv_tolerance",
)
