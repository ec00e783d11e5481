"""The lab's per-process side: the checkpoint in use (the sidebar's choice among $STEERING_CHECKPOINTS, else
$STEERING_CHECKPOINT), the model loaded once per process with its PCA map and judges, the Steer page's views
computed ahead on a background thread (steering.lab.prefetch), and the analyses remembered for every session,
serialised on the model's lock. A missing checkpoint or a computation that fails stops the page with a message.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch

from steering.lab import compute, logic
from steering.lab import talk_scripts as talks
from steering.lab.prefetch import FairLock, Prefetcher, in_background
from steering.model.ode import SolverConfig, SolverStepLimitError
from steering.training.checkpoint import ASSETS, CONFIG, CheckpointError, load_checkpoint, read_config, read_log

CHOSEN_CHECKPOINT_KEY = "lab_checkpoint"  # the sidebar's choice among $STEERING_CHECKPOINTS, this session


def _chosen_checkpoint() -> Path | None:
    try:
        chosen = st.session_state.get(CHOSEN_CHECKPOINT_KEY)
    except Exception:  # outside a Streamlit run (a plain import in a test or a script)
        return None
    return Path(chosen) if chosen else None


def checkpoint_dir() -> Path:
    """Read at call time (not import time), so a test or a shell can point the app elsewhere; the
    sidebar's choice among $STEERING_CHECKPOINTS wins for its session."""
    return _chosen_checkpoint() or Path(os.environ.get("STEERING_CHECKPOINT", ASSETS / "hybrid"))


def baseline_dir() -> Path:
    """$STEERING_BASELINE; for a checkpoint chosen in the sidebar, a `discrete` folder beside it when there is one."""
    chosen = _chosen_checkpoint()
    if chosen is not None and (chosen.parent / "discrete" / "config.json").is_file():
        return chosen.parent / "discrete"
    return Path(os.environ.get("STEERING_BASELINE", ASSETS / "discrete"))


def checkpoint_choices() -> list[Path]:
    """The one the app started with, the shipped flat field (assets/flat) beside it, and the hybrid
    checkpoints under $STEERING_CHECKPOINTS (any depth)."""
    found = [Path(os.environ.get("STEERING_CHECKPOINT", ASSETS / "hybrid"))]

    def listed(path: Path) -> bool:  # by where it is: "assets/flat" and /…/assets/flat are one checkpoint
        return any(path.resolve() == f.resolve() for f in found)

    if (ASSETS / "flat" / CONFIG).is_file() and not listed(ASSETS / "flat"):
        found.append(ASSETS / "flat")
    root = os.environ.get("STEERING_CHECKPOINTS")
    if root and Path(root).is_dir():
        for config in sorted(Path(root).rglob(CONFIG)):
            try:
                arch = json.loads(config.read_text())["model"]["arch"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not a checkpoint's config
            if arch == "hybrid" and not listed(config.parent):
                found.append(config.parent)
    return found


ROOT = Path(__file__).resolve().parent.parent


def checkpoint_label(path: Path) -> str:
    """A checkpoint's short name for the sidebar and links: its path from the repository root when it lies
    under it (assets/flat), else the path as given."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _config_of(path: str) -> dict | None:
    """A checkpoint's config.json (None when unreadable: the page's loader says why)."""
    try:
        return read_config(path)
    except CheckpointError:
        return None


def talk_folder() -> Path:
    """Where `?talk=NAME` looks: a talks/ folder beside the checkpoint (a model's own talks), else assets/talks."""
    own = checkpoint_dir() / "talks"
    return own if own.is_dir() else talks.TALKS_DIR


def model_texts() -> logic.ModelTexts:
    """The slider names, end labels, help texts, prompts and probe targets of the model in use."""
    return logic.model_texts(_config_of(str(checkpoint_dir())))


@st.cache_resource(show_spinner=False)
def _axis_judge(path: str, key: str):
    from steering.data.user_data import is_user_model
    from steering.judges.axis_judges import load_axis_judges

    if not is_user_model(_config_of(path)):
        return None
    return load_axis_judges(path)[0]


def axis_judge(loaded: Loaded):
    """A user model's first-axis judge (saved with it), or None for the shipped kind (sentiment judges)."""
    return _axis_judge(str(loaded.path), loaded.key)


@dataclass
class Loaded:
    model: object
    tok: object
    config: dict
    key: str  # identity of the weights: part of every cached result's key
    path: Path
    lock: FairLock  # the model keeps per-solve counters, so sessions take turns (pages before work-ahead)


@st.cache_resource(show_spinner="Loading the model…")
def _load(path: str) -> Loaded:
    from steering.analysis.pca import checkpoint_identity

    model, tok, config = load_checkpoint(path)
    return Loaded(model, tok, config, checkpoint_identity(path), Path(path), FairLock())


@st.cache_resource(show_spinner="Fitting the PCA map of hidden states…")
def _pca_map(path: str, key: str):
    loaded = _load(path)
    with loaded.lock:  # the map the talk kit and steering.load() draw on too (a model of one's own: its openings)
        return compute.lab_pca_map(loaded.model, loaded.tok, loaded.config, key)


@st.cache_resource(show_spinner=False)
def _steer_views(path: str, key: str) -> Prefetcher:
    loaded, pca = _load(path), _pca_map(path, key)

    def compute_one(steer_key: tuple):
        prompt, control, solver_items, seed, max_new_tokens = steer_key
        # one torch thread for this thread (OpenMP's setting is per thread): decoding one token at a
        # time is no faster on two, and the browser and the background worker keep a core
        torch.set_num_threads(1)
        # worked out ahead (on the worker), a view lets a waiting page have the model between two tokens
        pause = (lambda: loaded.lock.pause_for_foreground() and False) if in_background() else None
        with loaded.lock:
            view = compute.compute_steer_view(
                loaded.model,
                loaded.tok,
                pca,
                prompt,
                control,
                SolverConfig(**dict(solver_items)),
                seed=seed,
                max_new_tokens=max_new_tokens,
                cancelled=pause,
            )
        # outside the lock: the judges do not need the model
        return compute.attach_judgements([view], _axis_judge(path, key))[0]

    def compute_many(steer_keys, cancelled):
        """Several controls of one wish (same prompt, solver, seed, length) in one batched decode."""
        prompt, _, solver_items, seed, max_new_tokens = steer_keys[0]
        if any(k[:1] + k[2:] != steer_keys[0][:1] + steer_keys[0][2:] for k in steer_keys):
            return [compute_one(k) for k in steer_keys]

        def between_tokens() -> bool:
            # a page waiting for the model goes first (the batch's own state is its own); then: stop?
            loaded.lock.pause_for_foreground()
            return cancelled()

        torch.set_num_threads(BATCH_THREADS)
        with loaded.lock:
            views = compute.compute_steer_views(
                loaded.model,
                loaded.tok,
                pca,
                prompt,
                [k[1] for k in steer_keys],
                SolverConfig(**dict(solver_items)),
                seed=seed,
                max_new_tokens=max_new_tokens,
                cancelled=between_tokens,
            )
        return compute.attach_judgements(views, _axis_judge(path, key))

    return Prefetcher(
        compute_one,
        max_entries=4096,
        delay=0.15,
        compute_many=compute_many,
        batch=STEER_BATCH,
        on_done=_log_range,
        lock=loaded.lock,  # a page awaiting the batch lifts it ahead of a background job (the regimes map)
    )


# controls per background batch: after the two nearest, the slider's other 79 positions in one batch. Decoding
# reads every weight once a token whatever the batch, so bigger batches cost less per view (benchmarks/bench_range.py;
# figures in docs/benchmarks.md): the range after a prompt change 4.5 -> 3.3-3.7 s on D5's shape with 80 rather than
# 40 (docs/journal.md, "The range on two threads"). A page never waits for a whole batch, only for the token in
# progress.
STEER_BATCH = 80
# and the torch threads a batch runs on: all the process has (OMP_NUM_THREADS, else the cores), read at import on the
# main thread (OpenMP's setting is per thread). A batch has the work to share, where one row's decode does not: the
# range 6.4 -> 4.5 s on D5's shape (benchmarks/bench_app.py, 2 cores), the slider's step unchanged
BATCH_THREADS = torch.get_num_threads()


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
    return (
        f"**No trained model at `{path}`.**\n\n{err}\n\n"
        "Train the small demo model (about a minute on a laptop CPU for the tiny preset, longer for the "
        "full one) and point the lab at it:\n\n"
        "```\npython -m steering train --preset tiny --out runs/hybrid\n"
        "STEERING_CHECKPOINT=runs/hybrid streamlit run app.py\n```\n\n"
        "or train the full model into `assets/hybrid` with `python -m steering train --out assets/hybrid`."
    )


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


def run_safely(fn, *args, what: str = "this computation", **kwargs):
    """Run a computation; a solver cap or bad value becomes a visible message and stops the page."""
    try:
        return fn(*args, **kwargs)
    except SolverStepLimitError as err:
        st.error(logic.escape_markdown(f"The solver gave up on {what}: {err}"))
    except ValueError as err:
        st.error(logic.escape_markdown(f"Cannot compute {what}: {err}"))
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


def training_logs() -> dict[str, list[dict]]:
    return {"hybrid": read_log(checkpoint_dir()), "discrete": read_log(baseline_dir())}


# ---------------------------------------------------------------- the instant views (Steer and Compare pages)
@st.cache_data(max_entries=4096, show_spinner=False)
def judged(text: str, model_key: str, _axis_judge=None) -> compute.Judgement:
    """The text judged as the model's axes are (a user model: its own first-axis judge; model_key tells them apart)."""
    return compute.judge_text(text, _axis_judge)


@st.cache_data(max_entries=16, show_spinner=False)
def reference_paths(_pca_map, key: str) -> tuple[list, list]:
    """One reference prompt's paths for every u of the map (the first prompt, as the backdrop)."""
    first = _pca_map.reference[0].name
    chosen = [p for p in _pca_map.reference if p.name == first]
    return [p.points for p in chosen], [p.u for p in chosen]


@st.cache_data(max_entries=8192, show_spinner=False)
def instant_view_of(model_key: str, steer_key: tuple, _view: compute.SteerView, ends=None, _axis_judge=None) -> dict:
    """A view as the component draws it, once per model and slider position (each poll resends them all)."""
    import numpy as np

    from steering.figures.instant_steer import instant_view

    view = _view
    judgement = view.judgement or judged(view.prompt_shown + view.continuation, model_key, _axis_judge)
    return instant_view(
        view.prompt_shown,
        view.continuation,
        logic.steer_badges(judgement.score, judgement.vader_compound, view.solve_nfe, ends),
        view.next_tokens,
        view.next_probs,
        np.asarray(view.path),
        notice=view.generation_notice,
        stations=view.stations,
    )


def load(path: Path) -> Loaded:
    """Any checkpoint the switcher lists, loaded once per process; a broken one stops the page with a message."""
    try:
        return _load(str(path))
    except (CheckpointError, FileNotFoundError, ValueError) as err:
        st.error(missing_checkpoint_message(path, err))
        st.stop()


# ---------------------------------------------------------------- long computations on their own thread
@dataclass(eq=False)  # hashed by identity: a member of the set of running jobs
class BackgroundJob:
    """A computation that runs on its own thread while pages poll it: its progress, then its result or error."""

    progress: float = 0.0
    result: object = None
    error: str | None = None
    done: bool = False
    stopping: bool = False  # set at process exit: the job ends at its next progress report
    thread: threading.Thread | None = None


class JobStopped(Exception):
    """Raised at a background job's progress report once the process is exiting."""


BACKGROUND_ENTRIES = 16
BACKGROUND_EXIT_WAIT_S = 60.0
_running_jobs: set[BackgroundJob] = set()  # module-level, not in a cached resource: the exit hook runs after Streamlit


def stop_background_jobs(timeout: float = BACKGROUND_EXIT_WAIT_S) -> bool:
    """Ask every running job to end at its next progress report, and wait for them (at most timeout seconds in
    all). Runs at interpreter exit: a daemon thread still inside a torch op when the process ends aborts it
    ("terminate called without an active exception", exit 134). Returns whether every job ended."""
    deadline = time.monotonic() + timeout
    jobs = list(_running_jobs)
    for job in jobs:
        job.stopping = True
    for job in jobs:
        if job.thread is not None:
            job.thread.join(max(0.0, deadline - time.monotonic()))
    return not any(job.thread is not None and job.thread.is_alive() for job in jobs)


atexit.register(stop_background_jobs)


@st.cache_resource
def _background_store() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def background(loaded: Loaded, name: str, key: tuple, fn, what: str) -> BackgroundJob:
    """fn(model, tok, on_progress) once per (name, key) per process, on a thread of its own that holds the model's
    lock as background work: between two progress reports it lets a waiting page's own computation go first.
    Returns the job at once; the page shows job.progress until job.done."""
    store, lock = _background_store()
    full_key = (name, loaded.key) + tuple(key)
    with lock:
        job = store.get(full_key)
        if job is not None and not (job.done and job.error):
            store.move_to_end(full_key)
            return job
        job = store[full_key] = BackgroundJob()
        while len(store) > BACKGROUND_ENTRIES:
            oldest = next((k for k, j in store.items() if j.done), None)
            if oldest is None:
                break
            del store[oldest]

    def on_progress(fraction: float):
        if job.stopping:
            raise JobStopped
        job.progress = float(fraction)
        loaded.lock.pause_for_foreground()

    def work():
        torch.set_num_threads(1)  # the page's thread and the browser keep a core
        loaded.lock.acquire(background=True)
        try:
            job.result = fn(loaded.model, loaded.tok, on_progress)
        except JobStopped:
            job.error = f"{what} stopped: the app is shutting down"
        except (SolverStepLimitError, ValueError) as err:
            job.error = f"Cannot compute {what}: {err}"
        except Exception as err:  # noqa: BLE001 - shown on the page, not lost on a thread
            job.error = f"{what} failed: {type(err).__name__}: {err}"
        finally:
            loaded.lock.release()
            job.done = True
            _running_jobs.discard(job)

    job.thread = threading.Thread(target=work, name=f"lab-{name}", daemon=True)
    _running_jobs.add(job)
    job.thread.start()
    return job
