"""The lab's per-session side: URL state, sidebar controls, sliders, the page header, talks, charts.

The logic (parsing, clamping, computing) lives in steering/; this module only binds it
to widgets. The state a link should reproduce lives in st.session_state["lab_state"]
(a steering.lab.logic.LabState), is read from the query string once per session, and is
written back to the query string on every run. A talk (steering.lab.talk_scripts) opened by
`?talk=NAME&step=K` lives in st.session_state["lab_talk"] as (Talk, step index).
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st
import streamlit.components.v2 as components

from lab_ui import models
from steering.figures import instant_compare, instant_steer
from steering.lab import logic
from steering.lab import talk_scripts as talks
from steering.model.ode import FIXED_SOLVERS, SolverConfig

STATE_KEY = "lab_state"
NOTICES_KEY = "lab_url_notices"
START_PAGE_KEY = "lab_start_page"
TALK_KEY = "lab_talk"
TOLERANCES = tuple(10.0**-k for k in range(1, 9))
# the camera button of every chart saves a 1920 x 1080 PNG, a slide; the SVG button beside it (added
# in the browser by BROWSER_SCRIPT) saves the same as SVG. In presenter mode the type sizes are those
# of `python -m steering figures`.
SLIDE_WIDTH, SLIDE_HEIGHT = 1920, 1080
# the Steer page's sentiment slider, text and charts, drawn in the browser from every computed position
INSTANT_STEER = components.component(
    instant_steer.COMPONENT_NAME, html=instant_steer.HTML, css=instant_steer.CSS, js=instant_steer.JS
)
INSTANT_KEY = "w_instant_steer"
# the Compare page's: one slider over two models' positions (steering/figures/instant_compare.py)
INSTANT_COMPARE = components.component(
    instant_compare.COMPONENT_NAME, html=instant_compare.HTML, css=instant_compare.CSS, js=instant_compare.JS
)
COMPARE_KEY = "w_instant_compare"
POLLED_KEY = "steer_polled"  # set when this run is the component asking for positions computed since


def polled() -> bool:
    """Whether the Steer component's poll started this run (it may then wait a moment for more positions)."""
    return bool(st.session_state.pop(POLLED_KEY, False))


PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "width": SLIDE_WIDTH, "height": SLIDE_HEIGHT},
}


def _switch_checkpoint():
    chosen = st.session_state.get("w_checkpoint")
    st.session_state[models.CHOSEN_CHECKPOINT_KEY] = chosen
    texts = logic.model_texts(models._config_of(str(chosen)))
    update(prompt=texts.prompts[0], sentiment=0.0, style=0.0)  # the new model's own opening, at u = 0
    for key in ("w_prompt", "w_sentiment", "w_style"):
        st.session_state.pop(key, None)


def checkpoint_picker():
    """A sidebar list of the checkpoints to switch between (the shipped hybrid, assets/flat, and those
    under $STEERING_CHECKPOINTS), shown when there is more than one."""
    choices = [str(p) for p in models.checkpoint_choices()]
    if len(choices) < 2:
        return
    current = str(models.checkpoint_dir())
    if current not in choices:
        choices.insert(0, current)
    st.session_state.setdefault("w_checkpoint", current)
    st.sidebar.selectbox(
        "Checkpoint",
        choices,
        key="w_checkpoint",
        on_change=_switch_checkpoint,
        format_func=lambda path: Path(path).name if Path(path).name not in ("", ".") else path,
        help="The shipped hybrids (assets/hybrid, assets/flat) and those under $STEERING_CHECKPOINTS; "
        "the lab's words follow the model's axes.",
    )


# ---------------------------------------------------------------- state and URL
def state() -> logic.LabState:
    ss = st.session_state
    if STATE_KEY not in ss:
        params = st.query_params.to_dict()
        talk, index, talk_notices = talks.talk_from_query(params, models.talk_folder())
        base, talk_page = logic.default_state(models.model().config.get("model")), None
        texts = models.model_texts()
        if texts.user_model:  # a user model opens on one of its own held-out openings
            base = replace(base, prompt=texts.prompts[0])
        if talk is not None:
            # the step's state, then whatever else the link sets (presenter=1, or a changed u)
            ss[TALK_KEY] = (talk, index)
            base, talk_page = talk.steps[index].state(), talk.steps[index].page
            params = {k: v for k, v in params.items() if k not in ("talk", "step", "page")}
        parsed, page, notices = logic.parse_query_params(params, base)
        ss[STATE_KEY] = parsed
        ss[NOTICES_KEY] = talk_notices + notices
        ss[START_PAGE_KEY] = talk_page or page
    return ss[STATE_KEY]


def update(**changes):
    st.session_state[STATE_KEY] = replace(state(), **changes)
    st.session_state[NOTICES_KEY] = []  # the link's notices no longer describe what is shown


def start_page() -> str | None:
    """The page a link asked for with ?page=NAME, once per session."""
    state()
    return st.session_state.pop(START_PAGE_KEY, None)


def sync_url(page: str):
    """The address bar follows the view (the talk's short form while the view is a talk's step
    as it opened), and the sidebar's link reproduces it."""
    talk, index = st.session_state.get(TALK_KEY, (None, 0))
    now = state()
    if talk is not None and talk.steps[index].page == page and talk.steps[index].state(now.presenter) == now:
        params = talks.talk_query(talk, index, now.presenter)
    else:
        params = logic.to_query_params(now)
        if page != "steer":
            params["page"] = page
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    view_link(page)


def app_url() -> str | None:
    """The address the browser shows (no query), when Streamlit knows it."""
    try:
        return st.context.url
    except Exception:  # an older Streamlit, or no browser (a script run)
        return None


def view_link(page: str):
    """ "Copy link to this view": the URL that reproduces this page and state, in a code box whose
    copy button copies it. Drawn last in the sidebar; from the Steer page's fragment too, where
    Streamlit replaces it on every slider move."""
    link = logic.view_link(app_url(), state(), page)
    with st.sidebar.container(key="view_link"):
        st.caption(
            "Copy link to this view",
            help="Opens this page with this prompt, control and solver. The button at the right of the box copies it.",
        )
        st.code(link, language=None, wrap_lines=True)


def show_url_notices():
    for notice in st.session_state.get(NOTICES_KEY, []):
        st.warning(logic.escape_markdown(notice), icon=":material/link:")  # notices quote the link


def apply_style():
    st.markdown(logic.page_css(state().presenter), unsafe_allow_html=True)  # fixed CSS, no user text
    # fixed script, no user text: runs once per browser tab (it guards itself)
    st.sidebar.html(BROWSER_SCRIPT, unsafe_allow_javascript=True)


# In the page itself (st.html runs it in the app's document, not an iframe), installed once per tab:
# - PageUp / PageDown, what presentation clickers send, press the talk bar's Previous / Next buttons
#   (a text box keeps its own PageUp / PageDown);
# - a chart's modebar gets an "SVG" button beside the camera: the same 1920 x 1080 image as SVG (it
#   sets the chart's download format to svg for one press of the camera button).
# Streamlit's sanitiser (DOMPurify) drops a <script> the HTML opens with (the empty span goes first) and
# one whose text holds "<" before a letter or "/" (so the icon is built with DOM calls, not markup).
BROWSER_SCRIPT = """<span hidden></span><script>
(() => {
  if (window.__steeringLab) return;
  window.__steeringLab = true;
  const doc = window.document;
  doc.addEventListener("keydown", (event) => {
    if (event.key !== "PageDown" && event.key !== "PageUp") return;
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.isContentEditable ||
                   (target.tagName === "INPUT" && target.type !== "range"))) return;
    const button = doc.querySelector(event.key === "PageDown" ? ".st-key-talk_next button"
                                                              : ".st-key-talk_prev button");
    if (!button) return;
    event.preventDefault();
    event.stopPropagation();
    if (!button.disabled) button.click();
  }, true);
  doc.addEventListener("mouseover", (event) => {
    const chart = event.target.closest && event.target.closest(".js-plotly-plot");
    if (!chart || !chart._context) return;
    const camera = chart.querySelector('.modebar-btn[data-title^="Download plot"]');
    if (!camera || chart.querySelector(".lab-svg-button")) return;
    const button = doc.createElement("a");
    button.className = "modebar-btn lab-svg-button";
    button.setAttribute("rel", "tooltip");
    button.setAttribute("data-title", "Download plot as SVG (1920 x 1080)");
    const ns = "http://www.w3.org/2000/svg";
    const icon = doc.createElementNS(ns, "svg");
    const label = doc.createElementNS(ns, "text");
    for (const [k, v] of [["viewBox", "0 0 28 16"], ["width", "1.75em"], ["height", "1em"]]) icon.setAttribute(k, v);
    for (const [k, v] of [["x", "14"], ["y", "12"], ["text-anchor", "middle"], ["font-size", "10"],
                          ["font-family", "sans-serif"], ["font-weight", "bold"], ["fill", "rgba(68,68,68,0.5)"]]) {
      label.setAttribute(k, v);
    }
    label.textContent = "SVG";
    icon.appendChild(label);
    button.appendChild(icon);
    button.addEventListener("click", () => {
      const options = chart._context.toImageButtonOptions || (chart._context.toImageButtonOptions = {});
      const saved = options.format;
      options.format = "svg";
      try { camera.click(); } finally { options.format = saved; }
    });
    const group = doc.createElement("div");      // a group of its own, beside the camera's
    group.className = "modebar-group";
    group.appendChild(button);
    camera.parentElement.after(group);
  }, true);
})();
</script>"""


def font_size() -> int:
    return logic.figure_font_size(state().presenter)


# ---------------------------------------------------------------- widgets bound to the state
def _bind(widget_key: str, field: str, convert=lambda v: v):
    """Widget value <- state before the widget is drawn; state <- widget in its on_change callback."""
    st.session_state[widget_key] = getattr(state(), field)

    def on_change():
        # a checkpoint switch in the same rerun resets the widgets (drops their keys) before this runs
        if widget_key in st.session_state:
            update(**{field: convert(st.session_state[widget_key])})

    return on_change


bind = _bind  # for a page's own widget that is part of the link's state (the map's dims)


# the shipped model's (model_texts() has the model's)
SENTIMENT_HELP, STYLE_HELP = logic.SENTIMENT_HELP, logic.STYLE_HELP


def sentiment_slider(container=st, label: str | None = None):
    """The first axis's slider (named after the model's axis: sentiment for the shipped model)."""
    texts = models.model_texts()
    on_change = _bind("w_sentiment", "sentiment", lambda v: logic.snap_u(float(v)))
    return container.slider(
        label or texts.labels[0],
        logic.U_MIN,
        logic.U_MAX,
        step=logic.U_STEP,
        format="%+.2f",
        key="w_sentiment",
        on_change=on_change,
        help=texts.helps[0],
    )


def instant_sentiment(payload: dict):
    """The Steer page's instant view (steering/figures/instant_steer.py): its slider moves in the browser
    over the positions in `payload`; a settled or not yet computed position comes back as the state's
    sentiment, and each poll (while positions are pending) reruns the fragment it is drawn in."""

    return INSTANT_STEER(
        key=INSTANT_KEY,
        data=payload,
        default={"sentiment": state().sentiment},
        on_sentiment_change=lambda: _take_position(INSTANT_KEY),
        on_poll_change=lambda: st.session_state.update({POLLED_KEY: True}),
        height="content",
    )


def _take_position(key: str):
    """An instant view's reported slider position, clamped and snapped, into the state's first axis."""
    value = (st.session_state.get(key) or {}).get("sentiment")
    try:
        u = logic.snap_u(min(max(float(value), logic.U_MIN), logic.U_MAX))
    except (TypeError, ValueError):
        return  # not a number: keep the state as it is
    update(sentiment=u)


def instant_compare_view(payload: dict):
    """The Compare page's instant view (steering/figures/instant_compare.py): one slider, both models' positions."""
    return INSTANT_COMPARE(
        key=COMPARE_KEY,
        data=payload,
        default={"sentiment": state().sentiment},
        on_sentiment_change=lambda: _take_position(COMPARE_KEY),
        on_poll_change=lambda: st.session_state.update({POLLED_KEY: True}),
        height="content",
    )


def compare_pickers() -> tuple[Path, Path]:
    """The Compare page's two checkpoints, chosen in the sidebar among those the switcher lists (assets/flat and
    assets/hybrid by default), held in the state and the link as short names; a link's unknown name is replaced
    by the default, with a notice."""
    choices = {models.checkpoint_label(p): p for p in models.checkpoint_choices()}
    names = list(choices)
    flat, hybrid = models.checkpoint_label(models.ASSETS / "flat"), models.checkpoint_label(models.ASSETS / "hybrid")
    defaults = (flat, hybrid) if {flat, hybrid} <= set(names) else (names[0], names[min(1, len(names) - 1)])
    now, notices = state(), []
    fixed = {}
    for field, letter, default in (("model_a", "a", defaults[0]), ("model_b", "b", defaults[1])):
        value = getattr(now, field)
        if value not in choices:
            if value:
                notices.append(
                    f"{letter}={value!r} in the link is not a checkpoint this lab lists ({', '.join(names)}); "
                    f"using {default}."
                )
            fixed[field] = default
    if fixed:
        st.session_state[STATE_KEY] = replace(now, **fixed)
    for notice in notices:
        st.warning(logic.escape_markdown(notice), icon=":material/link:")
    for field, label in (("model_a", "Model A"), ("model_b", "Model B")):
        st.sidebar.selectbox(
            label,
            names,
            key=f"w_{field}",
            on_change=_bind(f"w_{field}", field),
            help="Any checkpoint the lab lists: the shipped hybrids (assets/hybrid, assets/flat) and those under "
            "$STEERING_CHECKPOINTS.",
        )
    return choices[state().model_a], choices[state().model_b]


def style_slider(container=st, label: str | None = None):
    """The second axis's slider (style for the shipped model; disabled at 0 for a one-axis model)."""
    texts = models.model_texts()
    on_change = _bind("w_style", "style", lambda v: logic.snap_u(float(v)))
    return container.slider(
        label or texts.labels[1],
        logic.U_MIN,
        logic.U_MAX,
        step=logic.U_STEP,
        format="%+.2f",
        key="w_style",
        on_change=on_change,
        help=texts.helps[1],
        disabled=not texts.used[1],
    )


def _pick_example():
    choice = st.session_state.get("w_example")
    if choice:
        update(prompt=choice)
    st.session_state["w_example"] = None


def sidebar_controls(*, solver: bool = True, prompt: bool = True, switcher: bool = True):
    """Prompt with examples, solver settings and presenter mode, in the sidebar (and the checkpoint switcher,
    except on the Compare page, which has a picker per side)."""
    bar = st.sidebar
    if switcher:
        checkpoint_picker()
    if prompt:
        bar.text_area(
            "Prompt",
            key="w_prompt",
            on_change=_bind("w_prompt", "prompt"),
            height=90,
            help=f"Any text; the first {logic.MAX_PROMPT_CHARS} characters are used.",
        )
        bar.pills(
            "Examples",
            models.model_texts().prompts,
            key="w_example",
            on_change=_pick_example,
            label_visibility="collapsed",
        )
    if solver:
        bar.selectbox(
            "Solver",
            logic.LAB_SOLVERS,
            key="w_solver",
            on_change=_bind("w_solver", "solver"),
            help="Fixed-step solvers take a set number of steps; adaptive ones choose their steps to meet a tolerance.",
        )
        if state().solver in FIXED_SOLVERS:
            bar.number_input(
                "Steps", logic.STEPS_MIN, logic.STEPS_MAX, key="w_steps", on_change=_bind("w_steps", "steps", int)
            )
        else:
            options = sorted(set(TOLERANCES) | {state().tolerance}, reverse=True)
            bar.select_slider(
                "Tolerance (rtol; atol = rtol/10)",
                options,
                key="w_tol",
                format_func=lambda t: f"{t:.0e}",
                on_change=_bind("w_tol", "tolerance", float),
            )
    bar.toggle(
        "Presenter mode",
        key="w_presenter",
        on_change=_bind("w_presenter", "presenter"),
        help="Larger type and less chrome, for a projector.",
    )


def run_through_app():
    """Make sure app.py routes this run. With a pages/ folder beside app.py, Streamlit starts a run in its old
    multipage mode while PagesManager.uses_pages_directory is set (a server: from its first session's start
    until something calls st.navigation, which only app.py does; AppTest: at every run): it runs the page file
    the URL names directly, without app.py. A page run that way runs app.py here instead, in the same run (so
    a pressed button still counts): app.py's st.navigation clears the flag and runs this page again; then
    this run stops."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        runpy.run_path(get_script_run_ctx().pages_manager.main_script_path)
        st.stop()


@dataclass
class Header:
    """What page_header found: the model, the cleaned prompt, the solver and the control (None where not asked)."""

    loaded: models.Loaded | None = None
    prompt: str | None = None
    solver: SolverConfig | None = None
    control: tuple[float, float] | None = None


def page_header(
    title: str,
    caption: str,
    *,
    load_model: bool = True,
    prompt: bool = True,
    solver: bool = False,
    sliders: bool = False,
    switcher: bool = True,
) -> Header:
    """Every page's opening: the model (a missing one stops the page with a message), the sidebar's
    controls, title and caption, the link's notices, then the prompt, solver and control sliders
    each page asks for (an unusable prompt or solver stops the page with a message).
    """
    run_through_app()
    header = Header(loaded=models.model() if load_model else None)
    sidebar_controls(solver=solver, prompt=prompt, switcher=switcher)
    st.title(title)
    st.caption(caption)
    show_url_notices()
    header.prompt = prompt_or_stop() if prompt else None
    header.solver = solver_or_stop() if solver else None
    header.control = control_sliders() if sliders else None
    return header


# ---------------------------------------------------------------- talks
def talk_position() -> tuple[talks.Talk, int] | None:
    state()
    return st.session_state.get(TALK_KEY)


def go_to_step(talk: talks.Talk, index: int) -> str:
    """Show a talk's step: its state (presenter mode kept); returns the page to switch to."""
    step = talk.steps[index]
    st.session_state[TALK_KEY] = (talk, index)
    st.session_state[STATE_KEY] = step.state(presenter=state().presenter)
    st.session_state[NOTICES_KEY] = []
    return step.page


def talk_bar() -> str | None:
    """During a talk, a bar above the page: Previous and Next (PageUp / PageDown press them), then
    "k / N · caption". Returns the page to switch to when one was pressed."""
    position = talk_position()
    if position is None:
        return None
    talk, index = position
    with st.container(key="talk_bar", horizontal=True, vertical_alignment="center", gap="small", wrap=False):
        back = st.button(
            "Previous",
            key="talk_prev",
            icon=":material/arrow_back:",
            disabled=index == 0,
            help="Previous step (PageUp)",
        )
        forward = st.button(
            "Next",
            key="talk_next",
            icon=":material/arrow_forward:",
            disabled=index == len(talk.steps) - 1,
            help="Next step (PageDown)",
        )
        st.markdown(
            f"**{index + 1} / {len(talk.steps)}** · {logic.escape_markdown(talk.steps[index].caption)}", width="stretch"
        )
    if back and index > 0:
        return go_to_step(talk, index - 1)
    if forward and index < len(talk.steps) - 1:
        return go_to_step(talk, index + 1)
    return None


def prompt_or_stop() -> str:
    """The cleaned prompt; notices shown; an unusable prompt stops the page with a message."""
    cleaned = logic.clean_prompt(state().prompt)
    for notice in cleaned.notices[:-1] if cleaned.refused else cleaned.notices:
        st.warning(logic.escape_markdown(notice))
    if cleaned.refused:
        st.info(logic.escape_markdown(cleaned.notices[-1]), icon=":material/edit:")
        st.stop()
    return cleaned.text


def solver_or_stop():
    try:
        return state().solver_config()
    except ValueError as err:
        st.error(f"These solver settings cannot be used: {err}")
        st.stop()


# ---------------------------------------------------------------- output helpers
def styled(fig, height: int | None = None):
    """A figure from steering.figures in the lab's look (type size follows presenter mode)."""
    from steering.figures.steer import style_figure

    return style_figure(fig, font_size(), height)


def plot(fig, key: str | None = None, height="content", on_select="ignore"):
    """A chart whose camera (PNG) and SVG buttons save it at slide size, named after its key.

    on_select="rerun": a click on a point reruns the page; the returned event holds the points."""
    config = {
        **PLOTLY_CONFIG,
        "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": f"steering-{key or 'chart'}"},
    }
    if on_select == "ignore":
        return st.plotly_chart(fig, config=config, key=key, height=height)
    return st.plotly_chart(fig, config=config, key=key, height=height, on_select=on_select, selection_mode=("points",))


def control_sliders():
    """Sentiment and style side by side at the top of a page."""
    left, right = st.columns(2, gap="large")
    sentiment_slider(left)
    style_slider(right)
    return state().control


def download_csv(label: str, columns: dict, filename: str, key: str | None = None):
    st.download_button(
        label, logic.table_csv(columns), file_name=filename, mime="text/csv", key=key, icon=":material/download:"
    )
