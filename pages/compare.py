"""Compare: two checkpoints side by side on one prompt, control and seed: the continuation and its judged
attribute, the next-token odds and the path (one slider redraws both), then each model's paths in its PCA map
and bend view with their curvature, dopri5's NFE and first step over u, depth use and block skip, and the
fixed-vs-adaptive divergence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from lab_ui import models, widgets
from steering.evaluation.compare import Side
from steering.figures.compare import divergence_pair_figure, nfe_pair_figure
from steering.figures.flow import pca_paths_figure
from steering.figures.instant_compare import compare_payload
from steering.figures.instant_steer import instant_payload
from steering.lab import compare, logic


@dataclass
class Model:
    """One side of the comparison: the checkpoint, its words, and the control it runs at (u₁ is shared)."""

    letter: str
    name: str
    loaded: models.Loaded
    texts: logic.ModelTexts
    style: float

    @property
    def title(self) -> str:
        return f"{self.letter}: {self.name}  ·  u₁ = {self.texts.names[0]}"

    def control(self, u: float) -> tuple[float, float]:
        return (u, self.style)


def side_payload(side: Model, prompt: str, solver, seed: int, max_new_tokens: int, polled: bool) -> tuple[dict, bool]:
    """One model's positions for the instant view, computing its range ahead as the Steer page does."""
    state = widgets.state()
    views = models.steer_views(side.loaded)
    judge = models.axis_judge(side.loaded)
    ends = side.texts.ends[0] if side.texts.user_model else None

    def key_at(u: float) -> tuple:
        return models.steer_key(prompt, side.control(u), solver, seed, max_new_tokens)

    if models.prefetch_enabled() and logic.worth_computing_ahead(solver):
        wish, wish_key = key_at(state.sentiment), f"compare_wish_{side.letter}"
        if st.session_state.get(wish_key) != wish:
            previous = st.session_state.get(f"compare_previous_{side.letter}")
            controls = logic.range_controls(side.control(state.sentiment), previous)
            views.want([key_at(c[0]) for c in controls], session=models.session_id())
            st.session_state[wish_key] = wish
            st.session_state[f"compare_previous_{side.letter}"] = side.control(state.sentiment)
    view = models.run_safely(views.result, key_at(state.sentiment), what=f"model {side.letter}'s continuation")
    range_keys = {u: key_at(u) for u in logic.slider_positions()}
    kept, coming = views.kept(range_keys.values()), False
    if models.prefetch_enabled():
        have, coming = views.wait_for_more(list(range_keys.values()), len(kept), timeout=0.2 if polled else 0.0)
        if have > len(kept):
            kept = views.kept(range_keys.values())
    kept[range_keys[state.sentiment]] = view
    pca = models.pca_map(side.loaded)
    paths, us = models.reference_paths(pca, pca.key)
    shown = {
        u: models.instant_view_of(side.loaded.key, k, kept[k], ends, judge) for u, k in range_keys.items() if k in kept
    }
    payload = instant_payload(
        shown,
        paths,
        us,
        state.sentiment,
        u_min=logic.U_MIN,
        u_max=logic.U_MAX,
        u_step=logic.U_STEP,
        explained=pca.explained_variance_ratio,
        font_size=widgets.font_size(),
    )
    return payload, coming


@st.fragment
def compare_results(sides: list[Model], prompt: str, solver, seed: int, max_new_tokens: int):
    """Everything that moves with u₁: both models' texts, odds and paths in one component."""
    polled = widgets.polled()
    built = [side_payload(side, prompt, solver, seed, max_new_tokens, polled) for side in sides]
    st.session_state["compare_serial"] = st.session_state.get("compare_serial", 0) + 1
    names = [side.texts.names[0] for side in sides]
    label = "u₁  (" + (names[0] if names[0] == names[1] else f"A: {names[0]}, B: {names[1]}") + ")"
    widgets.instant_compare_view(
        compare_payload(
            [payload for payload, _ in built],
            [side.title for side in sides],
            widgets.state().sentiment,
            u_min=logic.U_MIN,
            u_max=logic.U_MAX,
            u_step=logic.U_STEP,
            label=label,
            help_text=" · ".join(f"{side.letter}: {side.texts.helps[0]}" for side in sides),
            font_size=widgets.font_size(),
            pending=int(any(coming for _, coming in built)),
            serial=st.session_state["compare_serial"],
        )
    )
    widgets.sync_url("compare")


def second_axis_sliders(sides: list[Model]) -> bool:
    """u₂: one slider when both models have the same axes, one per model otherwise. True when they differ."""
    a, b = sides[0].texts, sides[1].texts
    differ = a.names != b.names
    columns = st.columns(2 if differ else 1)
    for column, (field, texts, letter) in zip(columns, (("style", a, "A"), ("style_b", b, "B"))):
        key = f"w_compare_{field}"
        column.slider(
            f"{letter}: {texts.labels[1]}" if differ else texts.labels[1],
            logic.U_MIN,
            logic.U_MAX,
            step=logic.U_STEP,
            format="%+.2f",
            key=key,
            on_change=widgets.bind(key, field, lambda v: logic.snap_u(float(v))),
            help=texts.helps[1],
            disabled=not texts.used[1],
        )
    return differ


def number(value: float, pattern: str) -> str:
    return "n/a" if value is None or not np.isfinite(value) else pattern.format(value)


def compare_page():
    header = widgets.page_header(
        "Compare two models",
        "One prompt, one control and one seed drive both checkpoints. Move u₁ and both sides redraw at once.",
        load_model=False,
        solver=True,
        switcher=False,
    )
    with st.sidebar.expander("Sampling"):
        seed = st.number_input("Seed", 0, 10_000, 0, key="w_seed")
        max_new_tokens = st.slider("New tokens", 4, 60, 24, key="w_new_tokens")
    path_a, path_b = widgets.compare_pickers()
    state = widgets.state()
    loaded = [models.load(path_a), models.load(path_b)]
    texts = [logic.model_texts(side.config) for side in loaded]
    differ = texts[0].names != texts[1].names
    sides = [
        Model("A", models.checkpoint_label(path_a), loaded[0], texts[0], state.style),
        Model("B", models.checkpoint_label(path_b), loaded[1], texts[1], state.style_b if differ else state.style),
    ]
    if path_a == path_b:
        st.info("Both sides show the same checkpoint: pick another in the sidebar (Model A / Model B).")
    if differ:
        st.info(
            logic.escape_markdown(
                f"The two models have different axes (A: {', '.join(texts[0].names)}; B: {', '.join(texts[1].names)}), "
                "so the control is set per model: the slider moves each model's first axis, and each has its own "
                "second-axis slider."
            ),
            icon=":material/tune:",
        )
    second_axis_sliders(sides)
    prompt, solver = header.prompt, header.solver
    compare_results(sides, prompt, solver, int(seed), int(max_new_tokens))

    # below: figures at the settled control (a slider move redraws only the view above)
    st.subheader("Paths through depth, each in its own PCA map and bend view")
    columns = st.columns(2, gap="large")
    for column, side in zip(columns, sides):
        pca = models.pca_map(side.loaded)
        paths = models.analysis(
            side.loaded,
            "compare_paths",
            (prompt, side.style, pca.key),
            lambda model, tok, pca=pca, side=side: compare.side_paths(model, tok, pca, prompt, side.style),
            what=f"model {side.letter}'s paths",
        )
        with column:
            st.markdown(f"**{logic.escape_markdown(side.title)}**")
            widgets.plot(
                widgets.styled(
                    pca_paths_figure(paths.pca, explained_variance=paths.explained, title="PCA map, u₁ from −2 to +2"),
                    height=340,
                ),
                key=f"compare_pca_{side.letter}",
            )
            widgets.plot(
                widgets.styled(
                    pca_paths_figure(
                        paths.bend,
                        title="Bend view (chord × main departure)",
                        titles=["along the chord", "departure from it"],
                        equal_scale=True,
                    ),
                    height=340,
                ),
                key=f"compare_bend_{side.letter}",
            )
            st.caption(
                f"Curvature (dopri5, u₁ = −2 … +2, largest over the paths): arc/chord − 1 "
                f"{number(paths.arc_to_chord_excess, '{:.2e}')}; ⊥ share {number(paths.orthogonal_share, '{:.2%}')} "
                f"in full space, {number(paths.orthogonal_share_bend, '{:.2%}')} in the bend view."
            )

    st.subheader("Solver work against u₁")
    steps = {
        side.letter: models.analysis(
            side.loaded,
            "compare_first_steps",
            (prompt, side.style),
            lambda model, tok, side=side: compare.nfe_and_first_steps(model, tok, prompt, side.style),
            what=f"model {side.letter}'s NFE sweep",
        )
        for side in sides
    }
    named = {f"{side.letter} ({side.name})": steps[side.letter] for side in sides}
    fig = nfe_pair_figure(
        next(iter(named.values())).u,
        {name: s.nfe for name, s in named.items()},
        {name: s.first_step for name, s in named.items()},
        compare.FIRST_STEP_THRESHOLD,
        {name: s.threshold_u for name, s in named.items()},
    )
    widgets.plot(widgets.styled(fig, height=520), key="compare_nfe")
    st.caption(
        "dopri5 at rtol 1e-3, atol 1e-4 (the Regimes page's default). A step may grow at most 10x, so a first step "
        f"below 1/11 ≈ {compare.FIRST_STEP_THRESHOLD:.3f} needs a third step. "
        + "; ".join(
            f"{s.letter}'s first step "
            + (
                (
                    "stays below it"
                    if steps[s.letter].first_step.max() < compare.FIRST_STEP_THRESHOLD
                    else "stays above it"
                )
                if steps[s.letter].threshold_u is None
                else f"crosses it at u₁ = {steps[s.letter].threshold_u:+.2f}"
            )
            + f" (h from {steps[s.letter].first_step.min():.3f} to {steps[s.letter].first_step.max():.3f})"
            for s in sides
        )
        + "."
    )

    st.subheader("Does the depth do work, and does the fixed solver follow dopri5?")
    divergences = {}
    metrics = st.columns(2, gap="large")
    for column, side in zip(metrics, sides):
        depth = models.analysis(
            side.loaded,
            "compare_depth",
            (),
            lambda model, tok, side=side: compare.depth_figures(Side(side.loaded.path, model, tok, side.loaded.config)),
            what=f"model {side.letter}'s depth figures",
        )
        divergences[f"{side.letter} ({side.name})"] = models.analysis(
            side.loaded,
            "compare_divergence",
            (prompt, side.control(state.sentiment)),
            lambda model, tok, side=side: compare.solver_divergence_at(
                model, tok, prompt, side.control(state.sentiment)
            ),
            what=f"model {side.letter}'s solver divergence",
        )
        with column:
            st.markdown(f"**{logic.escape_markdown(side.title)}**")
            m1, m2, m3 = st.columns(3)
            m1.metric("Depth use (bits/byte)", f"{depth['depth_use_bpb']:+.4f}", help="One Euler step minus trained.")
            m2.metric("Block skip (bits/byte)", f"{depth['block_skip_bpb']:+.4f}", help="No block minus trained.")
            m3.metric(
                "Divergence at τ = 1",
                f"{divergences[f'{side.letter} ({side.name})'].final_divergence:.3%}",
                help="The model's training solver against dopri5 (rtol 1e-7) on this prompt and control.",
            )
    widgets.plot(
        widgets.styled(
            divergence_pair_figure(
                {k: v.tau for k, v in divergences.items()}, {k: v.divergence for k, v in divergences.items()}
            ),
            height=360,
        ),
        key="compare_divergence",
    )
    st.caption(
        f"Depth use and block skip on {compare.DEPTH_TEXTS_PER_GROUP} held-out openings per label of each model's own "
        "text (`python -m steering compare A B` measures more, with the ratios)."
    )


compare_page()
