"""Steer: a prompt, the sentiment and style sliders and the solver; the continuation at that u with its judged
sentiment, the next-token odds, the prompt's path H(τ) in the PCA map, and the solve's NFE."""

from __future__ import annotations

import streamlit as st

from lab_ui import models, widgets
from steering.figures.instant_steer import instant_payload
from steering.lab import logic


@st.fragment
def steer_results(loaded: models.Loaded, prompt: str, solver, seed: int, max_new_tokens: int):
    """Everything that depends on u. The sentiment slider, the text and the charts are one component
    that holds every computed slider position in the browser, so a move there shows at once; this
    fragment reruns when the style changes, when the component reports a position, and while the rest
    of the range is computed (the component polls)."""
    state = widgets.state()
    widgets.style_slider(st)
    views = models.steer_views(loaded)
    texts = models.model_texts()
    # a model trained on one's own file: its first axis's judge and end labels on the badges
    judge, ends = models.axis_judge(loaded), (texts.ends[0] if texts.user_model else None)

    def key_at(u: float) -> tuple:
        return models.steer_key(prompt, (u, state.style), solver, seed, max_new_tokens)

    if models.prefetch_enabled() and logic.worth_computing_ahead(solver):
        # a new wish only when the inputs changed: the component's polls must not restart the worker.
        # The wish first: it replaces this session's earlier one, so work for inputs that changed is
        # cancelled before this run waits for the model
        wish = key_at(state.sentiment)
        if st.session_state.get("steer_wish") != wish:
            previous = st.session_state.get("steer_previous_control")
            views.want(
                [key_at(c[0]) for c in logic.range_controls(state.control, previous)], session=models.session_id()
            )
            st.session_state["steer_wish"], st.session_state["steer_previous_control"] = wish, state.control
    view = models.run_safely(views.result, key_at(state.sentiment), what="the steered continuation")

    range_keys = {u: key_at(u) for u in logic.slider_positions()}
    kept = views.kept(range_keys.values())
    # while the range is computed, wait a moment for more before answering (the component asks again)
    have, coming = len(kept), False
    if models.prefetch_enabled():
        wait = 0.4 if widgets.polled() else 0.0  # never delay the answer to a move
        have, coming = views.wait_for_more(list(range_keys.values()), have, timeout=wait)
        if have > len(kept):
            kept = views.kept(range_keys.values())
    kept[range_keys[state.sentiment]] = view
    pca = models.pca_map(loaded)
    paths, us = models.reference_paths(pca, pca.key)
    payload = instant_payload(
        {u: models.instant_view_of(loaded.key, k, kept[k], ends, judge) for u, k in range_keys.items() if k in kept},
        paths,
        us,
        state.sentiment,
        u_min=logic.U_MIN,
        u_max=logic.U_MAX,
        u_step=logic.U_STEP,
        explained=pca.explained_variance_ratio,
        font_size=widgets.font_size(),
        label=texts.labels[0],
        help_text=texts.helps[0],
        pending=int(coming),
        serial=next_serial(),
        chart_height="380px",
        fit_screen=state.presenter,  # the charts take the height the screen leaves them
    )
    widgets.instant_sentiment(payload)
    widgets.sync_url("steer")


def next_serial() -> int:
    """A new number for each payload this session sends (the component asks again only on a new one)."""
    st.session_state["steer_serial"] = st.session_state.get("steer_serial", 0) + 1
    return st.session_state["steer_serial"]


def steer():
    header = widgets.page_header(
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
    pca = models.pca_map(loaded)
    _, us = models.reference_paths(pca, pca.key)
    st.caption(
        models.model_texts().steer_caption
        + f"Same seed ({int(seed)}) at every u, so only the control changes the text; sampled with "
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
        from steering.lab.talk import talk_html_bytes

        with st.spinner("Computing 123 steered views, the NFE sweep and the solver comparison (about a minute)…"):
            with loaded.lock:
                talk = models.run_safely(
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


steer()
