"""The steering lab: `streamlit run app.py`. This file routes the pages and holds the landing page, Steer."""

from __future__ import annotations

import streamlit as st

import lab_ui as ui
from steering import lab
from steering.figures.steer import steer_figure

st.set_page_config(
    page_title="Steering lab",
    page_icon=":material/explore:",
    layout="wide",
    initial_sidebar_state="collapsed" if ui.state().presenter else "auto",
)


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
    ahead = []  # while the page is looked at, compute every other slider position, nearest first
    if ui.prefetch_enabled() and lab.worth_computing_ahead(solver):
        previous = st.session_state.get("steer_previous_control")
        ahead = [
            ui.steer_key(prompt, control, solver, seed, max_new_tokens)
            for control in lab.range_controls(state.control, previous)
        ]
        st.session_state["steer_previous_control"] = state.control
    # the wish first: it replaces this session's earlier one, so work for inputs that changed is
    # cancelled before this run waits for the model
    views.want(ahead, session=ui.session_id())
    view = ui.run_safely(
        views.result, ui.steer_key(prompt, state.control, solver, seed, max_new_tokens), what="the steered continuation"
    )
    judgement = view.judgement or judged(view.prompt_shown + view.continuation)

    with st.container(border=True, key="continuation"):
        st.markdown(lab.bold_then_plain(view.prompt_shown, view.continuation))
    # one line of badges, not st.metric in a column of its own: every element the fragment
    # sends costs the browser a render pass on each slider move
    st.markdown(
        lab.steer_badges(judgement.score, judgement.vader_compound, view.solve_nfe),
        help=(
            "Judged by the trained TF-IDF judge when its files exist, else by VADER's compound score mapped to 0…1. "
            "NFE: vector-field evaluations the solver needed to integrate the prompt from τ = 0 to 1 "
            f"({view.solver_label})."
        ),
    )
    if view.generation_notice:
        st.caption(view.generation_notice)

    pca = ui.pca_map(loaded)
    paths, us = reference_paths(pca, pca.key)
    fig = steer_figure(
        view.next_tokens,
        view.next_probs,
        paths,
        us,
        view.path,
        state.sentiment,
        explained=pca.explained_variance_ratio,
        font_size=ui.font_size(),
        bars_title=f"Next token at u = {lab.format_u(state.sentiment)}",
        map_title="H(τ) in the PCA map (mean over tokens)",
        height=None if state.presenter else ui.STEER_MAP_HEIGHT,
    )
    if state.presenter:  # the page fits the screen: the chart takes the height the rest leaves (presenter CSS)
        with st.container(height=ui.STEER_MAP_HEIGHT, key="steer_map_box", border=False):
            ui.plot(fig, key="steer_map", height="stretch")
    else:
        ui.plot(fig, key="steer_map")
    ui.sync_url("steer")


def steer():
    header = ui.page_header(
        "Steer the flow",
        "A transformer whose middle layers are an ODE, dH/dτ = α·F(H, τ, u). "
        "Move u and watch the text, the next-token odds and the hidden-state path change.",
        solver=True,
    )
    with st.sidebar.expander("Sampling"):
        seed = st.number_input("Seed", 0, 10_000, 0, key="w_seed")
        max_new_tokens = st.slider("New tokens", 4, 60, 24, key="w_new_tokens")
    loaded, prompt, solver = header.loaded, header.prompt, header.solver
    steer_results(loaded, prompt, solver, int(seed), int(max_new_tokens))
    # outside the fragment: none of this changes with u, so a slider move does not redraw it
    pca = ui.pca_map(loaded)
    _, us = reference_paths(pca, pca.key)
    st.caption(
        f"Same seed ({int(seed)}) at every u, so only the control changes the text; sampled with "
        f"{solver.label()}. In the map, thin lines: the reference prompt {pca.reference[0].name!r} at u = "
        f"{', '.join(f'{u:+g}' for u in us)}; thick: your prompt now."
    )
    if st.button(
        "Build offline demo",
        icon=":material/download:",
        key="w_build_talk",
        help="One self-contained HTML file for this prompt and seed: every sentiment from −2 to +2 (steps of "
        "0.1) at style −1, 0 and +1, precomputed with the lab's default solver; it opens offline.",
    ):
        from steering.talk import talk_html_bytes

        with st.spinner("Computing 123 steered views, the NFE sweep and the solver comparison (about a minute)…"):
            with loaded.lock:
                talk = ui.run_safely(
                    talk_html_bytes,
                    loaded.model,
                    loaded.tok,
                    pca,
                    [prompt],
                    seed=int(seed),
                    max_new_tokens=int(max_new_tokens),
                    checkpoint=loaded.path,
                    config=loaded.config,
                    what="the offline demo",
                )
        st.download_button(
            "Download offline demo (HTML)",
            talk,
            file_name="talk.html",
            mime="text/html",
            icon=":material/download:",
            on_click="ignore",
            key="w_download_talk",
        )


def home():
    """The root URL: app.py sends it on to Steer (or to the page that ?page= or a talk names) before it runs."""
    st.switch_page(PAGES["steer"])


# Every page has its own path, Steer too (/steer): the root is a hidden page that forwards to it, since
# Streamlit serves the default page at "/" only and would answer /steer with "Page not found". The page
# files live in lab_pages/, not pages/: with a pages/ folder, the first session after the server starts
# runs Streamlit's old pages/ emulation instead of this file, with the same dialog for /steer.
ROOT = st.Page(
    home, title="Steering lab", icon=":material/explore:", url_path="home", default=True, visibility="hidden"
)
PAGES = {
    "steer": st.Page(steer, title="Steer", icon=":material/explore:", url_path="steer"),
    **{
        name: st.Page(f"lab_pages/{name}.py", title=title, icon=f":material/{icon}:", url_path=name)
        for name, title, icon in (
            ("trajectories", "Trajectories", "timeline"),
            ("solvers", "Solvers", "compare_arrows"),
            ("regimes", "Regimes", "speed"),
            ("lens", "Depth lens", "layers"),
            ("dynamics", "Dynamics", "blur_on"),
            ("training", "Training", "monitoring"),
            ("results", "Results", "fact_check"),
        )
    },
}

page = st.navigation([ROOT, *PAGES.values()], position="top" if ui.state().presenter else "sidebar")
ui.apply_style()
target = ui.start_page() or ("steer" if page is ROOT else None)
stepped = ui.talk_bar()  # a talk's Previous / Next: that step's page, its state already set
if stepped is not None or (target is not None and (page is ROOT or PAGES[target].url_path != page.url_path)):
    st.switch_page(PAGES[stepped or target])
page.run()
