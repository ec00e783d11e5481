"""The steering lab: `streamlit run app.py`. This file routes the pages and holds the landing page, Steer."""
from __future__ import annotations

import streamlit as st

import lab_ui as ui
from steering import lab
from steering.figures.steer import steer_figure

st.set_page_config(page_title="Steering lab", page_icon=":material/explore:", layout="wide",
                   initial_sidebar_state="collapsed" if ui.state().presenter else "auto")


@st.cache_data(max_entries=4096, show_spinner=False)
def judged(text: str) -> lab.Judgement:
    return lab.judge_text(text)


@st.cache_data(max_entries=16, show_spinner=False)
def reference_paths(_pca_map, key: str) -> tuple[list, list]:
    """One reference prompt's paths for every u of the map (the first prompt, as the backdrop)."""
    first = _pca_map.reference[0].name
    chosen = [p for p in _pca_map.reference if p.name == first]
    return [p.points for p in chosen], [p.u for p in chosen]


@st.fragment
def steer_results(loaded: ui.Loaded, prompt: str, solver, seed: int, max_new_tokens: int):
    """Everything that depends on u: only this reruns while a slider is dragged."""
    left, right = st.columns(2, gap="large")
    ui.sentiment_slider(left)
    ui.style_slider(right)
    state = ui.state()
    views = ui.steer_views(loaded)
    ahead = []   # while the page is looked at, compute every other slider position, nearest first
    if ui.prefetch_enabled() and lab.worth_computing_ahead(solver):
        previous = st.session_state.get("steer_previous_control")
        ahead = [ui.steer_key(prompt, control, solver, seed, max_new_tokens)
                 for control in lab.range_controls(state.control, previous)]
        st.session_state["steer_previous_control"] = state.control
    # the wish first: it replaces this session's earlier one, so work for inputs that changed is
    # cancelled before this run waits for the model
    views.want(ahead, session=ui.session_id())
    view = ui.run_safely(views.result, ui.steer_key(prompt, state.control, solver, seed, max_new_tokens),
                         what="the steered continuation")
    judgement = view.judgement or judged(view.prompt_shown + view.continuation)

    with st.container(border=True, key="continuation"):
        st.markdown(lab.bold_then_plain(view.prompt_shown, view.continuation))
    # one line of badges, not st.metric in a column of its own: every element the fragment
    # sends costs the browser a render pass on each slider move
    st.markdown(lab.steer_badges(judgement.score, judgement.vader_compound, view.solve_nfe), help=(
        "Judged by the trained TF-IDF judge when its files exist, else by VADER's compound score mapped to 0…1. "
        f"NFE: vector-field evaluations the solver needed to integrate the prompt from τ = 0 to 1 ({view.solver_label})."))
    if view.generation_notice:
        st.caption(view.generation_notice)

    pca = ui.pca_map(loaded)
    paths, us = reference_paths(pca, pca.key)
    ui.plot(steer_figure(view.next_tokens, view.next_probs, paths, us, view.path, state.sentiment,
                         explained=pca.explained_variance_ratio, font_size=ui.font_size(),
                         bars_title=f"Next token at u = {lab.format_u(state.sentiment)}",
                         map_title="H(τ) in the PCA map (mean over tokens)"), key="steer_map")
    ui.sync_url("steer")


def steer():
    loaded = ui.model()
    ui.sidebar_controls()
    with st.sidebar.expander("Sampling"):
        seed = st.number_input("Seed", 0, 10_000, 0, key="w_seed")
        max_new_tokens = st.slider("New tokens", 4, 60, 24, key="w_new_tokens")
    st.title("Steer the flow")
    st.caption("A transformer whose middle layers are an ODE, dH/dτ = α·F(H, τ, u). "
               "Move u and watch the text, the next-token odds and the hidden-state path change.")
    ui.show_url_notices()
    prompt = ui.prompt_or_stop()
    solver = ui.solver_or_stop()
    steer_results(loaded, prompt, solver, int(seed), int(max_new_tokens))
    # outside the fragment: none of this changes with u, so a slider move does not redraw it
    pca = ui.pca_map(loaded)
    _, us = reference_paths(pca, pca.key)
    st.caption(f"Same seed ({int(seed)}) at every u, so only the control changes the text; sampled with "
               f"{solver.label()}. In the map, thin lines: the reference prompt {pca.reference[0].name!r} at u = "
               f"{', '.join(f'{u:+g}' for u in us)}; thick: your prompt now.")


PAGES = {
    "steer": st.Page(steer, title="Steer", icon=":material/explore:", url_path="steer", default=True),
    "trajectories": st.Page("pages/trajectories.py", title="Trajectories", icon=":material/timeline:", url_path="trajectories"),
    "solvers": st.Page("pages/solvers.py", title="Solvers", icon=":material/compare_arrows:", url_path="solvers"),
    "regimes": st.Page("pages/regimes.py", title="Regimes", icon=":material/speed:", url_path="regimes"),
    "lens": st.Page("pages/lens.py", title="Depth lens", icon=":material/layers:", url_path="lens"),
    "dynamics": st.Page("pages/dynamics.py", title="Dynamics", icon=":material/blur_on:", url_path="dynamics"),
    "training": st.Page("pages/training.py", title="Training", icon=":material/monitoring:", url_path="training"),
    "results": st.Page("pages/results.py", title="Results", icon=":material/fact_check:", url_path="results"),
}

page = st.navigation(list(PAGES.values()), position="top" if ui.state().presenter else "sidebar")
ui.apply_style()
target = ui.start_page()
if target is not None and PAGES[target].url_path != page.url_path:
    st.switch_page(PAGES[target])
page.run()
