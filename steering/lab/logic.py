"""The logic behind the lab's pages, kept apart from Streamlit so it is tested on its own.

A page's state (prompt, control, solver, tolerance, page) round-trips through the URL
query string, so a bookmarked or shared link reproduces a view. Anything read from a
URL or a text box is untrusted: it is cleaned, clamped or refused here, and every
change is reported as a plain-text notice that the page shows. Also here: the model's axis labels and
help (model_texts), the pages' CSS, badges and downloads. What the pages compute through the model:
steering/lab/compute.py.
"""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..model.ode import ADAPTIVE_SOLVERS, FIXED_SOLVERS, SolverConfig

EXAMPLE_PROMPTS = (
    "The movie was",
    "I watched this film last night and",
    "The acting in this movie",
    "This is one of those films that",
    "The ending",
)
U_MIN, U_MAX, U_STEP = -2.0, 2.0, 0.05
STEPS_MIN, STEPS_MAX = 1, 64
TOL_MIN, TOL_MAX = 1e-8, 1e-1
MAX_PROMPT_CHARS = 300
LAB_SOLVERS = FIXED_SOLVERS + ADAPTIVE_SOLVERS

# url_path of each page (/steer, /regimes, ...; the root forwards to /steer); `?page=NAME` opens NAME.
PAGES = ("steer", "compare", "trajectories", "solvers", "regimes", "lens", "dynamics", "training", "results")


@dataclass(frozen=True)
class LabState:
    prompt: str = EXAMPLE_PROMPTS[0]
    sentiment: float = 0.0
    style: float = 0.0
    solver: str = "euler"
    steps: int = 4
    tolerance: float = 1e-3
    presenter: bool = False
    dims: int = 2  # the Trajectories page's map: 2-D or 3-D
    model_a: str = ""  # the Compare page's two checkpoints ("": its defaults), checked against the switcher's list
    model_b: str = ""
    style_b: float = 0.0  # the Compare page's second axis for model B, where the two models' axes differ

    def solver_config(self) -> SolverConfig:
        """The solver these settings name; adaptive solvers use atol = tolerance / 10 and the step cap."""
        if self.solver in FIXED_SOLVERS:
            return SolverConfig(self.solver, steps=int(self.steps))
        return SolverConfig(self.solver, rtol=float(self.tolerance), atol=float(self.tolerance) / 10)

    @property
    def control(self) -> tuple[float, float]:
        return (float(self.sentiment), float(self.style))

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_STATE = LabState()


def default_state(model_config: dict | None = None) -> LabState:
    """The lab's opening state for a checkpoint: its own training solver (ModelConfig.solver, solver_steps;
    4 Euler steps for checkpoints from before the choice), so a link without a solver shows the model as trained."""
    model_config = model_config or {}
    return replace(
        DEFAULT_STATE,
        solver=model_config.get("solver", DEFAULT_STATE.solver),
        steps=int(model_config.get("solver_steps", DEFAULT_STATE.steps)),
    )


def cache_dir() -> Path:
    """Where the lab and export-talk keep what they compute once per checkpoint (PCA maps):
    $STEERING_CACHE, default ~/.cache/steering, so the offline file's map is the one the lab shows."""
    return Path(os.environ.get("STEERING_CACHE", Path.home() / ".cache" / "steering"))


def format_u(value: float) -> str:
    return f"{value:+.2f}"


PREFETCH_MAX_STEPS = 8


def worth_computing_ahead(solver: SolverConfig) -> bool:
    """Whether the Steer page should compute neighbouring slider positions in the background.

    Only for fixed-step solvers with a few steps: their cost is small and known. An adaptive
    solve can take seconds at a tight tolerance (and its cost depends on u), and a background
    job holds the model until it ends, so the user's next request could wait behind it.
    """
    return solver.is_fixed and solver.steps <= PREFETCH_MAX_STEPS


def neighbour_controls(
    control: tuple[float, float], previous: tuple[float, float] | None = None
) -> list[tuple[float, float]]:
    """The controls one slider step away on the axis moved last (sentiment at first), most
    likely next first: onward in the direction of the last move, then back."""
    axis = 1 if previous is not None and previous[1] != control[1] and previous[0] == control[0] else 0
    onward = -1.0 if previous is not None and previous[axis] > control[axis] else 1.0
    out = []
    for direction in (onward, -onward):
        value = snap_u(control[axis] + direction * U_STEP)
        if U_MIN <= value <= U_MAX:
            moved = list(control)
            moved[axis] = value
            out.append((moved[0], moved[1]))
    return out


def range_controls(
    control: tuple[float, float], previous: tuple[float, float] | None = None
) -> list[tuple[float, float]]:
    """Every other position of the sentiment slider (style held), in the order the Steer page computes
    them ahead: the neighbours on the axis moved last (neighbour_controls), then the rest nearest first,
    at equal distance the direction of the last move first."""
    first = neighbour_controls(control, previous)
    onward = -1.0 if previous is not None and previous[0] > control[0] else 1.0
    positions = slider_positions()
    positions.sort(key=lambda v: (round(abs(v - control[0]) / U_STEP), 0 if (v - control[0]) * onward > 0 else 1))
    rest = [(v, control[1]) for v in positions if v != control[0]]
    return first + [c for c in rest if c not in first]


def slider_positions() -> list[float]:
    """Every position of a u slider, U_MIN to U_MAX."""
    return [snap_u(U_MIN + k * U_STEP) for k in range(int(round((U_MAX - U_MIN) / U_STEP)) + 1)]


def snap_u(value: float) -> float:
    """Round to the slider's step so a URL value lands on a slider position."""
    return round(round(value / U_STEP) * U_STEP, 2) + 0.0


# ---------------------------------------------------------------- untrusted input
def _as_single(value) -> str | None:
    """Query params may repeat a key; the last value wins (as in st.query_params)."""
    if isinstance(value, (list, tuple)):
        return str(value[-1]) if value else None
    return None if value is None else str(value)


def parse_float(raw: str | None, name: str, default: float, low: float, high: float, notices: list[str]) -> float:
    """A finite number in [low, high]; text or NaN gives the default, out of range is clamped. Notices say which."""
    if raw is None or raw.strip() == "":
        return default
    shown = _shorten(raw, 24)
    try:
        value = float(raw.strip())
    except ValueError:
        notices.append(f"{name}={shown!r} in the link is not a number; using {default:g}.")
        return default
    if math.isnan(value):
        notices.append(f"{name}={shown!r} in the link is not a number; using {default:g}.")
        return default
    if value < low or value > high:
        clamped = min(max(value, low), high)
        notices.append(f"{name}={shown} in the link is outside [{low:g}, {high:g}]; clamped to {clamped:g}.")
        return clamped
    return value


def parse_int(raw: str | None, name: str, default: int, low: int, high: int, notices: list[str]) -> int:
    value = parse_float(raw, name, float(default), float(low), float(high), notices)
    if value != int(value):
        notices.append(f"{name}={_shorten(raw or '', 24)} in the link is not a whole number; using {round(value)}.")
    return int(round(value))


def parse_bool(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _is_emoji_like(ch: str) -> bool:
    return unicodedata.category(ch) in ("So", "Sk", "Cs") or 0x1F000 <= ord(ch) <= 0x1FAFF


@dataclass(frozen=True)
class CleanPrompt:
    text: str  # what the model gets ("" when refused)
    notices: tuple[str, ...]
    refused: bool = False  # True: nothing usable, the page should ask for a prompt instead of computing


def clean_prompt(raw) -> CleanPrompt:
    """Control characters removed, length capped, emoji flagged, empty refused.

    Newlines and tabs become spaces: the model was trained on single-line reviews.
    """
    if not isinstance(raw, str):
        return CleanPrompt("", ("The prompt must be text.",), refused=True)
    notices = []
    kept, dropped = [], 0
    for ch in raw:
        if ch in "\n\r\t":
            kept.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") and not _is_emoji_like(ch):
            dropped += 1
        else:
            kept.append(ch)
    text = " ".join("".join(kept).split())
    if dropped:
        notices.append(f"Removed {dropped} control or invisible character{'s' if dropped > 1 else ''} from the prompt.")
    if len(text) > MAX_PROMPT_CHARS:
        notices.append(f"The prompt is {len(text)} characters; only the first {MAX_PROMPT_CHARS} are used.")
        text = text[:MAX_PROMPT_CHARS].rstrip()
    if any(_is_emoji_like(ch) for ch in text):
        notices.append(
            "The prompt contains emoji or symbols the model never saw in its movie-review "
            "training text; they are fed to it byte by byte, so expect odd continuations."
        )
    if not text:
        return CleanPrompt(
            "", tuple(notices) + ("The prompt is empty: type a few words or pick an example.",), refused=True
        )
    return CleanPrompt(text, tuple(notices))


def parse_query_params(
    params: Mapping[str, object], base: LabState = DEFAULT_STATE
) -> tuple[LabState, str | None, list[str]]:
    """(state, page or None, notices) from URL query parameters; unknown keys are ignored.

    Keys: prompt, u (sentiment), style, solver, steps, tol, dims, presenter, page, and the Compare page's a, b
    (checkpoint folders, checked by the page against the ones it lists) and style_b.
    """
    notices: list[str] = []
    get = {
        key: _as_single(params.get(key))
        for key in ("prompt", "u", "style", "solver", "steps", "tol", "dims", "presenter", "page", "a", "b", "style_b")
    }
    state = base
    if get["prompt"] is not None:
        cleaned = clean_prompt(get["prompt"])
        notices.extend(cleaned.notices)
        if not cleaned.refused:
            state = replace(state, prompt=cleaned.text)
        else:
            notices.append(f"Using the example prompt {base.prompt!r} instead.")
    sentiment = snap_u(parse_float(get["u"], "u", base.sentiment, U_MIN, U_MAX, notices))
    style = snap_u(parse_float(get["style"], "style", base.style, U_MIN, U_MAX, notices))
    style_b = snap_u(parse_float(get["style_b"], "style_b", base.style_b, U_MIN, U_MAX, notices))
    models = {k: _shorten(get[k].strip(), MAX_PROMPT_CHARS) if get[k] is not None else "" for k in ("a", "b")}
    solver = base.solver
    if get["solver"] is not None:
        name = get["solver"].strip().lower()
        if name in LAB_SOLVERS:
            solver = name
        else:
            notices.append(
                f"solver={_shorten(get['solver'], 24)!r} in the link is unknown; choose one of "
                f"{', '.join(LAB_SOLVERS)}. Using {base.solver}."
            )
    steps = parse_int(get["steps"], "steps", base.steps, STEPS_MIN, STEPS_MAX, notices)
    tolerance = parse_float(get["tol"], "tol", base.tolerance, TOL_MIN, TOL_MAX, notices)
    presenter = parse_bool(get["presenter"]) if get["presenter"] is not None else base.presenter
    dims = base.dims
    if get["dims"] is not None:
        if get["dims"].strip() in ("2", "3"):
            dims = int(get["dims"].strip())
        else:
            notices.append(f"dims={_shorten(get['dims'], 24)!r} in the link is not 2 or 3; using {base.dims}.")
    page = None
    if get["page"] is not None:
        name = get["page"].strip().lower()
        if name in PAGES:
            page = name
        else:
            notices.append(f"page={_shorten(get['page'], 24)!r} in the link is unknown; pages are {', '.join(PAGES)}.")
    state = replace(
        state,
        sentiment=sentiment,
        style=style,
        solver=solver,
        steps=steps,
        tolerance=tolerance,
        presenter=presenter,
        dims=dims,
        model_a=models["a"] or base.model_a,
        model_b=models["b"] or base.model_b,
        style_b=style_b,
    )
    return state, page, notices


def to_query_params(state: LabState) -> dict[str, str]:
    """The URL form of a state; values at their defaults are left out to keep links short."""
    params = {"prompt": state.prompt, "u": f"{state.sentiment:g}", "style": f"{state.style:g}", "solver": state.solver}
    if state.solver in FIXED_SOLVERS:
        params["steps"] = str(int(state.steps))
    else:
        params["tol"] = f"{state.tolerance:g}"
    if state.dims != DEFAULT_STATE.dims:
        params["dims"] = str(int(state.dims))
    if state.presenter:
        params["presenter"] = "1"
    if state.style == DEFAULT_STATE.style:
        del params["style"]
    for key, value in (("a", state.model_a), ("b", state.model_b)):
        if value:
            params[key] = value
    if state.style_b != DEFAULT_STATE.style_b:
        params["style_b"] = f"{state.style_b:g}"
    return params


def view_link(app_url: str | None, state: LabState, page: str) -> str:
    """The link that reproduces a view: the app's base URL, the page's path and the state's query.

    app_url is the address the browser shows (st.context.url: no query); a trailing page path is
    dropped to find the base, so the link is right from any page and behind a path prefix. Without
    an address (a test, a script) the link is relative to the app's root.
    """
    from urllib.parse import urlencode, urlsplit, urlunsplit

    if page not in PAGES:
        raise ValueError(f"unknown page {page!r}")
    if app_url:
        parts = urlsplit(app_url)
        segments = [s for s in parts.path.split("/") if s]
        if segments and segments[-1] in PAGES:
            segments = segments[:-1]
        path = "/".join(segments + [page])
        base = urlunsplit((parts.scheme, parts.netloc, "/" + path, "", ""))
    else:
        base = "/" + page
    return f"{base}?{urlencode(to_query_params(state))}"


# ---------------------------------------------------------------- presentation
PRESENTER_CSS = """
<style>
/* type sized for a 1920 x 1080 screen (22px) and scaled with a smaller one, as a slide is (1280 x 720:
   two thirds); the media queries are for browsers without typed arithmetic in calc() */
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
@media (max-width: 1700px), (max-height: 960px) { html, body, [data-testid="stAppViewContainer"] { font-size: 18px; } }
@media (max-width: 1400px), (max-height: 800px) { html, body, [data-testid="stAppViewContainer"] { font-size: 15px; } }
html, body, [data-testid="stAppViewContainer"] {
  font-size: clamp(12px, calc(22px * min(1, calc(100vw / 1920px), calc(100vh / 1080px))), 22px); }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.25rem; }
[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"],
[data-testid="stStatusWidget"], footer { display: none !important; }
.block-container, [data-testid="stMainBlockContainer"] {
  padding: 0.6rem 2.5rem 0.6rem 2.5rem !important; max-width: 96vw; }
[data-testid="stVerticalBlock"] { gap: 0.5rem; }
h1 { font-size: 2.6rem !important; padding: 0 0 0.2rem 0 !important; }
h2, h3 { font-size: 1.9rem !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] p, [data-testid="stMetricValue"] div {
  font-size: 2.6rem !important; line-height: 1.2 !important; }
[data-testid="stSlider"] label p, [data-testid="stWidgetLabel"] p { font-size: 1.3rem !important; }
</style>
"""

BASE_CSS = """
<style>
[data-testid="stMetricValue"] { font-variant-numeric: tabular-nums; }
.block-container, [data-testid="stMainBlockContainer"] { padding-top: 2.2rem; }
</style>
"""


def page_css(presenter: bool) -> str:
    """Fixed CSS for the page (never built from user text)."""
    return BASE_CSS + (PRESENTER_CSS if presenter else "")


def figure_font_size(presenter: bool) -> int:
    return 20 if presenter else 14


def sentiment_label(score: float | None) -> str:
    """Words for a judged P(positive) in [0, 1]."""
    if score is None or not math.isfinite(score):
        return "not judged"
    if score >= 0.65:
        return "positive"
    if score <= 0.35:
        return "negative"
    return "mixed"


# ---------------------------------------------------------------- what the model's axes are called

SENTIMENT_LABEL = "Sentiment u₁  (− negative … + positive)"
STYLE_LABEL = "Style u₂  (− critic blurb … + user review)"
SENTIMENT_HELP = (
    "u₁ = +1: a positive review, as in the training data; u₁ = −1: a negative one; 0: no preference. "
    "|u₁| between 1 and 2 exaggerates the sentiment (the model learned strong steering at ±1.65; ±2 extends it); "
    "beyond 2 the text turns to caricature."
)
STYLE_HELP = (
    "u₂ = −1: a Rotten Tomatoes critic's blurb, as in the data; u₂ = +1: an IMDB user review; 0: either. "
    "|u₂| between 1 and 2 exaggerates the source's manner."
)
STEER_CAPTION = "u₁ = ±1 asks for a positive / negative review as in the data, u₁ = ±2 for an exaggerated one. "
UNUSED_AXIS_LABEL = "u₂ (unused: this model has one axis)"


@dataclass(frozen=True)
class ModelTexts:
    """Every word the lab shows about the control, read from a checkpoint's config: the shipped model's
    own words for a checkpoint of the movie-reviews corpus, else its file's axis names and end labels."""

    labels: tuple[str, str]  # the two sliders' labels
    helps: tuple[str, str]
    used: tuple[bool, bool]  # a one-axis model leaves u₂ unused (always 0)
    ends: tuple[tuple[str, str], ...]  # per axis: (negative, positive) end labels
    names: tuple[str, ...]
    prompts: tuple[str, ...]  # the prompt suggestions (the first is the default prompt)
    probe_targets: tuple[str, str]  # the Regimes page's (positive, negative) target tokens
    steer_caption: str
    user_model: bool = False

    def short_label(self, index: int) -> str:
        """ "Sentiment u₁" for the first slider, "Style u₂" for the second."""
        return self.labels[index].split("  (")[0]


def model_texts(config: dict | None) -> ModelTexts:
    from ..data.user_data import axes_of, checkpoint_prompts, is_user_model, probe_targets

    axes = axes_of(config)
    if not is_user_model(config):
        return ModelTexts(
            (SENTIMENT_LABEL, STYLE_LABEL),
            (SENTIMENT_HELP, STYLE_HELP),
            (True, True),
            tuple((a.negative, a.positive) for a in axes),
            tuple(a.name for a in axes),
            EXAMPLE_PROMPTS,
            (" good", " bad"),
            STEER_CAPTION,
        )
    labels = [axes[0].slider_label(0), axes[1].slider_label(1) if len(axes) > 1 else UNUSED_AXIS_LABEL]
    helps = [axes[0].help_text(), axes[1].help_text() if len(axes) > 1 else "This model was trained on one axis."]
    first = axes[0]
    return ModelTexts(
        (labels[0], labels[1]),
        (helps[0], helps[1]),
        (True, len(axes) > 1),
        tuple((a.negative, a.positive) for a in axes),
        tuple(a.name for a in axes),
        checkpoint_prompts(config),
        probe_targets(first),
        f"u₁ = ±1 asks for {first.positive!r} / {first.negative!r} text ({first.name}) as in the data, "
        "u₁ = ±2 for an exaggerated one. ",
        user_model=True,
    )


def axis_verdict(score: float | None, ends: tuple[str, str]) -> str:
    """Words for a judged P(positive end) in [0, 1] on a user's axis: its end labels, or "mixed"."""
    if score is None or not math.isfinite(score):
        return "not judged"
    if score >= 0.65:
        return ends[1]
    if score <= 0.35:
        return ends[0]
    return "mixed"


# ---------------------------------------------------------------- downloads and tables
def table_csv(columns: Mapping[str, Sequence]) -> str:
    """CSV text of equal-length columns (numbers with full precision)."""
    names = list(columns)
    lengths = {len(columns[n]) for n in names}
    if len(lengths) > 1:
        raise ValueError(f"columns differ in length: { ({n: len(columns[n]) for n in names}) }")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for row in zip(*(columns[n] for n in names)):
        writer.writerow([repr(float(v)) if isinstance(v, float) else v for v in row])
    return out.getvalue()


def _mean_std(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"


def stability_rows(logs: Mapping[str, Iterable[dict]]) -> list[dict]:
    """The paper's stability table, one row per (model, stage) in a training log.

    Grad norms are before clipping; 'exploding' and 'vanishing' are the trainer's own flags.
    """
    rows = []
    for name, records in logs.items():
        records = list(records)
        for stage in sorted({r.get("stage", 1) for r in records}):
            part = [r for r in records if r.get("stage", 1) == stage]
            if not part:
                continue
            val = [r["val_loss"] for r in part if r.get("val_loss") is not None]
            alphas = [r["alpha"] for r in part if r.get("alpha") is not None]
            ode = [r["ode_grad_norm"] for r in part if r.get("ode_grad_norm") is not None]
            rows.append(
                {
                    "model": name,
                    "stage": "1 (language model)" if stage == 1 else f"{stage} (steering)",
                    "steps": len(part),
                    "final loss": round(part[-1]["loss"], 4),
                    "final val loss": round(val[-1], 4) if val else None,
                    "grad norm": _mean_std([r["grad_norm"] for r in part if r.get("grad_norm") is not None]),
                    "middle-block grad norm": _mean_std(ode),
                    "exploding steps": sum(bool(r.get("exploding")) for r in part),
                    "vanishing steps": sum(bool(r.get("vanishing")) for r in part),
                    "final α": round(alphas[-1], 4) if alphas else None,
                }
            )
    return rows


_MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|<>~$:=\"'&^%@")


def escape_markdown(text: str) -> str:
    """Text that st.markdown shows literally: every ASCII punctuation mark backslash-escaped
    (CommonMark allows it), so no link, emphasis, HTML, LaTeX or :shortcode: can form."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def steer_badges(
    score: float, vader_compound: float, nfe: int, ends: tuple[str, str] | None = None
) -> list[tuple[str, str]]:
    """The Steer page's numbers as (text, tone) badges: the verdict toned by sentiment, VADER, NFE.
    ends: a user model's first axis (negative, positive end labels): its judge's verdict and NFE."""
    if ends is not None:
        verdict = axis_verdict(score, ends)
        tone = {ends[1]: "positive", ends[0]: "negative"}.get(verdict, "neutral")
        return [
            (f"judged {verdict}: P({ends[1]}) {score:.0%}", tone),
            (f"NFE of one solve: {int(nfe)}", "neutral"),
        ]
    verdict = sentiment_label(score)
    return [
        (f"judged {verdict}: P(positive) {score:.0%}", verdict if verdict in ("positive", "negative") else "neutral"),
        (f"VADER {vader_compound:+.2f}", "neutral"),
        (f"NFE of one solve: {int(nfe)}", "neutral"),
    ]


def bold_then_plain(bold: str, plain: str) -> str:
    """Markdown for `bold` in bold followed by `plain`, both shown literally.

    Whitespace stays outside the ** markers (CommonMark ignores emphasis that touches it).
    """
    core = bold.strip()
    if not core:
        return escape_markdown(bold + plain)
    lead, trail = bold[: len(bold) - len(bold.lstrip())], bold[len(bold.rstrip()) :]
    return f"{lead}**{escape_markdown(core)}**{trail}{escape_markdown(plain)}"
