"""Streamlit glue shared by the lab's pages: cached loaders, URL state, sidebar controls.

The logic (parsing, clamping, computing) lives in steering/; this module only binds it
to widgets. The state a link should reproduce lives in st.session_state["lab_state"]
(a steering.lab.LabState), is read from the query string once per session, and is
written back to the query string on every run.
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st
import torch

from steering import lab
from steering.checkpoint import ASSETS, CheckpointError, load_checkpoint, read_log
from steering.ode import FIXED_SOLVERS, SolverConfig, SolverStepLimitError
from steering.prefetch import FairLock, Prefetcher, in_background

STATE_KEY = "lab_state"
NOTICES_KEY = "lab_url_notices"
START_PAGE_KEY = "lab_start_page"
TOLERANCES = tuple(10.0 ** -k for k in range(1, 9))
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def checkpoint_dir() -> Path:
    """Read at call time (not import time), so a test or a shell can point the app elsewhere."""
    return Path(os.environ.get("STEERING_CHECKPOINT", ASSETS / "hybrid"))


def baseline_dir() -> Path:
    return Path(os.environ.get("STEERING_BASELINE", ASSETS / "discrete"))


def cache_dir() -> Path:
    return Path(os.environ.get("STEERING_CACHE", Path.home() / ".cache" / "steering"))


@dataclass
class Loaded:
    model: object
    tok: object
    config: dict
    key: str                 # identity of the weights: part of every cached result's key
    path: Path
    lock: FairLock            # the model keeps per-solve counters, so sessions take turns (pages before work-ahead)


@st.cache_resource(show_spinner="Loading the model…")
def _load(path: str) -> Loaded:
    from steering.analysis.pca import checkpoint_identity
    model, tok, config = load_checkpoint(path)
    return Loaded(model, tok, config, checkpoint_identity(path), Path(path), FairLock())


@st.cache_resource(show_spinner="Fitting the PCA map of hidden states…")
def _pca_map(path: str, key: str):
    from steering.analysis.pca import pca_map_for_checkpoint
    loaded = _load(path)
    with loaded.lock:
        return pca_map_for_checkpoint(loaded.model, loaded.tok, key, cache_dir() / "pca")


@st.cache_resource(show_spinner=False)
def _steer_views(path: str, key: str) -> Prefetcher:
    loaded, pca = _load(path), _pca_map(path, key)

    def compute(steer_key: tuple):
        prompt, control, solver_items, seed, max_new_tokens = steer_key
        # one torch thread for this thread (OpenMP's setting is per thread): decoding one token at a
        # time is no faster on two, and the browser and the background worker keep a core
        torch.set_num_threads(1)
        # worked out ahead (on the worker), a view lets a waiting page have the model between two tokens
        pause = (lambda: loaded.lock.pause_for_foreground() and False) if in_background() else None
        with loaded.lock:
            view = lab.compute_steer_view(loaded.model, loaded.tok, pca, prompt, control,
                                          SolverConfig(**dict(solver_items)), seed=seed, max_new_tokens=max_new_tokens,
                                          cancelled=pause)
        return lab.attach_judgements([view])[0]     # outside the lock: the judges do not need the model

    def compute_many(steer_keys, cancelled):
        """Several controls of one wish (same prompt, solver, seed, length) in one batched decode."""
        prompt, _, solver_items, seed, max_new_tokens = steer_keys[0]
        if any(k[:1] + k[2:] != steer_keys[0][:1] + steer_keys[0][2:] for k in steer_keys):
            return [compute(k) for k in steer_keys]

        def between_tokens() -> bool:
            # a page waiting for the model goes first (the batch's own state is its own); then: stop?
            loaded.lock.pause_for_foreground()
            return cancelled()
        torch.set_num_threads(1)
        with loaded.lock:
            views = lab.compute_steer_views(loaded.model, loaded.tok, pca, prompt, [k[1] for k in steer_keys],
                                            SolverConfig(**dict(solver_items)), seed=seed,
                                            max_new_tokens=max_new_tokens, cancelled=between_tokens)
        return lab.attach_judgements(views)
    return Prefetcher(compute, max_entries=4096, delay=0.15, compute_many=compute_many, batch=STEER_BATCH,
                      on_done=_log_range)


# controls per background batch: a batch of 16 took half the time per view of a batch of 4 (22 vs 42 ms
# on the shared 2-core machine); a page never waits for a whole batch, only for the token in progress
STEER_BATCH = 16


def _log_range(session, seconds: float, keys: int, last_key: tuple):
    """With STEERING_PREFETCH_LOG set, one JSON line per finished work-ahead (benchmarks/bench_app.py reads it)."""
    target = os.environ.get("STEERING_PREFETCH_LOG")
    if target:
        line = {"session": str(session), "seconds": seconds, "keys": keys, "prompt": last_key[0], "at": time.time()}
        with open(target, "a") as f:
            f.write(json.dumps(line) + "\n")


def steer_views(loaded: Loaded) -> Prefetcher:
    """The Steer page's views (continuation, next token, path), kept per process and computed
    ahead for the slider's neighbouring positions."""
    return _steer_views(str(loaded.path), loaded.key)


def session_id() -> str:
    """This browser session's identity, for the work-ahead's turn-taking."""
    ss = st.session_state
    if "steer_session" not in ss:
        ss["steer_session"] = uuid.uuid4().hex
    return ss["steer_session"]


def prefetch_enabled() -> bool:
    """STEERING_PREFETCH=0 turns the Steer page's work-ahead off (a shared server, or to measure without it)."""
    return os.environ.get("STEERING_PREFETCH", "1") != "0"


def steer_key(prompt: str, control: tuple[float, float], solver: SolverConfig, seed: int, max_new_tokens: int) -> tuple:
    return prompt, tuple(control), tuple(sorted(solver.to_dict().items())), seed, max_new_tokens


def missing_checkpoint_message(path: Path, err: Exception) -> str:
    return (f"**No trained model at `{path}`.**\n\n{err}\n\n"
            "Train the small demo model (about a minute on a laptop CPU for the tiny preset, longer for the "
            "full one) and point the lab at it:\n\n"
            "```\npython -m steering train --preset tiny --out runs/hybrid\n"
            "STEERING_CHECKPOINT=runs/hybrid streamlit run app.py\n```\n\n"
            "or train the full model into `assets/hybrid` with `python -m steering train --out assets/hybrid`.")


def model() -> Loaded:
    """The checkpoint, loaded once per process; a missing or broken one stops the page with a message."""
    path = checkpoint_dir()
    try:
        return _load(str(path))
    except (CheckpointError, FileNotFoundError, ValueError) as err:
        st.error(missing_checkpoint_message(path, err))
        st.stop()


def pca_map(loaded: Loaded):
    return _pca_map(str(loaded.path), loaded.key)


# ---------------------------------------------------------------- state and URL
def state() -> lab.LabState:
    ss = st.session_state
    if STATE_KEY not in ss:
        parsed, page, notices = lab.parse_query_params(st.query_params.to_dict())
        ss[STATE_KEY] = parsed
        ss[NOTICES_KEY] = notices
        ss[START_PAGE_KEY] = page
    return ss[STATE_KEY]


def update(**changes):
    st.session_state[STATE_KEY] = replace(state(), **changes)
    st.session_state[NOTICES_KEY] = []   # the link's notices no longer describe what is shown


def start_page() -> str | None:
    """The page a link asked for with ?page=NAME, once per session."""
    state()
    return st.session_state.pop(START_PAGE_KEY, None)


def sync_url(page: str):
    params = lab.to_query_params(state())
    if page != "steer":
        params["page"] = page
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)


def show_url_notices():
    for notice in st.session_state.get(NOTICES_KEY, []):
        st.warning(lab.escape_markdown(notice), icon=":material/link:")   # notices quote the link


def apply_style():
    st.markdown(lab.page_css(state().presenter), unsafe_allow_html=True)   # fixed CSS, no user text


def font_size() -> int:
    return lab.figure_font_size(state().presenter)


# ---------------------------------------------------------------- widgets bound to the state
def _bind(widget_key: str, field: str, convert=lambda v: v):
    """Widget value <- state before the widget is drawn; state <- widget in its on_change callback."""
    st.session_state[widget_key] = getattr(state(), field)

    def on_change():
        update(**{field: convert(st.session_state[widget_key])})
    return on_change


def sentiment_slider(container=st, label: str = "Sentiment u₁  (− negative … + positive)"):
    on_change = _bind("w_sentiment", "sentiment", lambda v: lab.snap_u(float(v)))
    return container.slider(label, lab.U_MIN, lab.U_MAX, step=lab.U_STEP, format="%+.2f", key="w_sentiment",
                            on_change=on_change)


def style_slider(container=st, label: str = "Style u₂  (− critic blurb … + user review)"):
    on_change = _bind("w_style", "style", lambda v: lab.snap_u(float(v)))
    return container.slider(label, lab.U_MIN, lab.U_MAX, step=lab.U_STEP, format="%+.2f", key="w_style",
                            on_change=on_change)


def _pick_example():
    choice = st.session_state.get("w_example")
    if choice:
        update(prompt=choice)
    st.session_state["w_example"] = None


def sidebar_controls(*, solver: bool = True):
    """Prompt with examples, solver settings and presenter mode, in the sidebar."""
    bar = st.sidebar
    bar.text_area("Prompt", key="w_prompt", on_change=_bind("w_prompt", "prompt"), height=90,
                  help=f"Any text; the first {lab.MAX_PROMPT_CHARS} characters are used.")
    bar.pills("Examples", lab.EXAMPLE_PROMPTS, key="w_example", on_change=_pick_example,
              label_visibility="collapsed")
    if solver:
        bar.selectbox("Solver", lab.LAB_SOLVERS, key="w_solver", on_change=_bind("w_solver", "solver"),
                      help="Fixed-step solvers take a set number of steps; adaptive ones choose their steps "
                           "to meet a tolerance.")
        if state().solver in FIXED_SOLVERS:
            bar.number_input("Steps", lab.STEPS_MIN, lab.STEPS_MAX, key="w_steps",
                             on_change=_bind("w_steps", "steps", int))
        else:
            options = sorted(set(TOLERANCES) | {state().tolerance}, reverse=True)
            bar.select_slider("Tolerance (rtol; atol = rtol/10)", options, key="w_tol",
                              format_func=lambda t: f"{t:.0e}", on_change=_bind("w_tol", "tolerance", float))
    bar.toggle("Presenter mode", key="w_presenter", on_change=_bind("w_presenter", "presenter"),
               help="Larger type and less chrome, for a projector.")


def prompt_or_stop() -> str:
    """The cleaned prompt; notices shown; an unusable prompt stops the page with a message."""
    cleaned = lab.clean_prompt(state().prompt)
    for notice in cleaned.notices[:-1] if cleaned.refused else cleaned.notices:
        st.warning(lab.escape_markdown(notice))
    if cleaned.refused:
        st.info(lab.escape_markdown(cleaned.notices[-1]), icon=":material/edit:")
        st.stop()
    return cleaned.text


def solver_or_stop():
    try:
        return state().solver_config()
    except ValueError as err:
        st.error(f"These solver settings cannot be used: {err}")
        st.stop()


def run_safely(fn, *args, what: str = "this computation", **kwargs):
    """Run a computation; a solver cap or bad value becomes a visible message and stops the page."""
    try:
        return fn(*args, **kwargs)
    except SolverStepLimitError as err:
        st.error(lab.escape_markdown(f"The solver gave up on {what}: {err}"))
    except ValueError as err:
        st.error(lab.escape_markdown(f"Cannot compute {what}: {err}"))
    st.stop()


# ---------------------------------------------------------------- heavy computations, remembered per process
@st.cache_resource
def _memo_store() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


MEMO_ENTRIES = 256


def memo(name: str, key: tuple, compute):
    """compute() once per (name, key) per process, least recently used dropped first.

    Unlike st.cache_data this lets compute() drive a progress bar drawn outside it, and it
    keeps results as the objects the analysis returns (no pickling round trip).
    """
    store, lock = _memo_store()
    full_key = (name,) + tuple(key)
    with lock:
        if full_key in store:
            store.move_to_end(full_key)
            return store[full_key]
    value = compute()
    with lock:
        store[full_key] = value
        while len(store) > MEMO_ENTRIES:
            store.popitem(last=False)
    return value


def analysis(loaded: Loaded, name: str, key: tuple, fn, *args, what: str, **kwargs):
    """A model computation: remembered, serialised on the model's lock, errors shown as messages."""
    def compute():
        with loaded.lock:
            return fn(loaded.model, loaded.tok, *args, **kwargs)
    return run_safely(memo, name, (loaded.key,) + tuple(key), compute, what=what)


# ---------------------------------------------------------------- output helpers
def styled(fig, height: int | None = None):
    """A figure from steering.figures in the lab's look (type size follows presenter mode)."""
    from steering.figures.steer import style_figure
    return style_figure(fig, font_size(), height)


def plot(fig, key: str | None = None):
    st.plotly_chart(fig, config=PLOTLY_CONFIG, key=key)


def control_sliders():
    """Sentiment and style side by side at the top of a page."""
    left, right = st.columns(2, gap="large")
    sentiment_slider(left)
    style_slider(right)
    return state().control


def download_csv(label: str, columns: dict, filename: str, key: str | None = None):
    st.download_button(label, lab.table_csv(columns), file_name=filename, mime="text/csv", key=key,
                       icon=":material/download:")


def training_logs() -> dict[str, list[dict]]:
    return {"hybrid": read_log(checkpoint_dir()), "discrete": read_log(baseline_dir())}
