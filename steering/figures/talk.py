"""The offline talk demo's data as plotly JSON, one piece per view (plain data in, no model here); its page: talk_page.

Input: a steering.lab.talk.TalkData (any object with its fields fits). The figures are the lab's own
builders (steer_figure, pca_paths_figure, nfe_regimes_figure, divergence_figure), serialised to
plotly JSON; the page's script only swaps precomputed pieces in and calls Plotly.react, so a
slider step costs a lookup and two redraws. plotly.js is inlined and a Content-Security-Policy
forbids every load, so the file works from file:// with no network at all.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence

import numpy as np
import plotly
from plotly.utils import PlotlyJSONEncoder

from .flow import pca_paths_figure
from .regimes import nfe_regimes_figure
from .solvers import divergence_figure
from .steer import _template, steer_figure, style_layout

FONT_SIZE = 14
SIGNIFICANT = 5  # digits kept of every number in the file: far below what a chart can show
STEER_TITLE = "H(τ) in the PCA map (mean over tokens)"

# labels of the evaluate figures (results.json "evaluate"); any other number is listed under its key
EVALUATION_LABELS = {
    "val_loss_hybrid": "held-out loss, hybrid (u = 0)",
    "val_loss_discrete": "held-out loss, discrete baseline",
    "bits_per_byte_hybrid": "bits per byte, hybrid",
    "bits_per_byte_discrete": "bits per byte, discrete",
    "steer_pos_clf": "steered positive, judged positive (classifier)",
    "steer_neg_clf": "steered negative, judged negative (classifier)",
    "steer_pos_vader": "steered positive, judged positive (VADER)",
    "steer_neg_vader": "steered negative, judged negative (VADER)",
    "probe_good_pos": "P(' good') share at u = +1",
    "probe_bad_neg": "P(' bad') share at u = −1",
    "style_rt_acc": "style −1 judged critic blurb",
    "style_imdb_acc": "style +1 judged user review",
    "solver_divergence": "final divergence, the trained fixed solver vs dopri5",
    "valid_word_rate": "valid word rate",
    "repeated_trigram_rate": "repeated trigram rate",
    "ppl_ratio_steered": "perplexity ratio, steered / unsteered",
    "judge_heldout_acc": "judge's held-out accuracy",
    "steer_u": "|u| steered at",
}


# ---------------------------------------------------------------- plain JSON
def compact(value):
    """Numbers rounded to SIGNIFICANT digits (non-finite ones become null), numpy arrays (also plotly's
    base64-encoded ones) turned into lists, so the page's script can slice every array."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:  # plotly's base64 form of a numpy array: plain numbers instead
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            if "shape" in value:
                array = array.reshape([int(n) for n in str(value["shape"]).split(",")])
            return compact(array.tolist())
        return {str(k): compact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [compact(v) for v in value]
    if isinstance(value, np.ndarray):
        return compact(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return float(f"{x:.{SIGNIFICANT}g}") if math.isfinite(x) else None
    return value


def figure_json(fig, height: int | None = None, styled: bool = True) -> dict:
    """A figure as plain data in the lab's look (steer.style_layout), without its template (the page
    holds one shared copy). The look is merged into the plain layout: plotly.py's validated
    update_layout with a whole template costs seconds per figure."""
    data = json.loads(json.dumps(fig.to_plotly_json(), cls=PlotlyJSONEncoder))
    layout = data.setdefault("layout", {})
    layout.pop("template", None)
    data.pop("frames", None)
    if styled:
        look = style_layout(FONT_SIZE, height)
        look.pop("template")
        for key, value in look.items():
            layout[key] = (
                {**layout[key], **value} if isinstance(value, dict) and isinstance(layout.get(key), dict) else value
            )
    return compact(data)


def script_json(value) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' survives unescaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def signed(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def style_name(x: float) -> str:
    return "0" if x == 0 else signed(x, 0)


# ---------------------------------------------------------------- the pieces of the page
SHIPPED_AXES = (
    {"name": "sentiment", "negative": "negative", "positive": "positive"},
    {"name": "style", "negative": "critic blurb", "positive": "user review"},
)


def axis_words(data) -> tuple[dict, dict]:
    """The control's two axes (name and end labels): the shipped model's, or a model's own (data.axes,
    trained with --data; a one-axis model's second is "unused")."""
    axes = list(getattr(data, "axes", None) or [])
    if not axes:
        return SHIPPED_AXES
    second = axes[1] if len(axes) > 1 else {"name": "unused", "negative": "", "positive": ""}
    return axes[0], second


def _path(name: str, u: float, tau, points):
    from types import SimpleNamespace

    return SimpleNamespace(
        name=name, u=float(u), tau=np.asarray(tau, dtype=float), points=np.asarray(points, dtype=float)
    )


def steer_parts(point, reference_points, reference_u, explained) -> dict:
    """The Steer page's figure at one grid point, cut into what changes with u (the bars, the current
    path and its ends, the axes and titles) and what does not (the reference paths)."""
    bars_title = f"Next token at u = ({signed(point.sentiment)}, {style_name(point.style)})"
    fig = figure_json(
        steer_figure(
            point.next_tokens,
            point.next_probs,
            reference_points,
            reference_u,
            np.asarray(point.path, dtype=float),
            point.sentiment,
            explained=explained,
            font_size=FONT_SIZE,
            bars_title=bars_title,
            map_title=STEER_TITLE,
        ),
        styled=False,
    )
    data, layout = fig["data"], fig["layout"]
    return {
        "data": data,
        "layout": layout,
        "patch": {
            "bars": data[0],
            "now": data[-2],
            "ends": data[-1],
            "layout": {k: layout[k] for k in ("xaxis", "yaxis", "xaxis2", "yaxis2", "annotations")},
        },
    }


def _extent(paths: Sequence[np.ndarray], pad: float = 0.06) -> tuple[list[float], list[float]]:
    pts = np.concatenate([np.asarray(p, dtype=float)[:, :2] for p in paths])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    span = np.maximum(hi - lo, 1e-6)
    return [float(lo[0] - pad * span[0]), float(hi[0] + pad * span[0])], [
        float(lo[1] - pad * span[1]),
        float(hi[1] + pad * span[1]),
    ]


def trajectories_figure(talk, style_index: int, sentiments, explained, x_range, y_range, names=("u₁", "u₂")) -> dict:
    """Every u₁ path at one u₂ (thin, red → blue), the current one thick; axes fixed so the τ animation
    does not rescale them. names: the two axes' names, for the title."""
    row = talk.points[style_index]
    middle = int(np.argmin([abs(s) for s in sentiments]))
    paths = [_path("", p.sentiment, talk.tau, p.path) for p in row]
    now = _path("now", row[middle].sentiment, talk.tau, row[middle].path)
    fig = pca_paths_figure(
        paths,
        dims=2,
        explained_variance=explained,
        highlight=[now],
        title=f"Every {names[0]} path at {names[1]} {style_name(row[0].style)}, animated over τ",
    )
    out = figure_json(fig, 480)
    for trace in out["data"][: len(paths)]:  # thin lines without markers: 41 × 33 markers cost a redraw dearly
        trace.update(showlegend=False, mode="lines")
        trace.pop("marker", None)
    layout = out["layout"]
    layout["xaxis"] = {**layout.get("xaxis", {}), "range": x_range, "autorange": False}
    layout["yaxis"] = {**layout.get("yaxis", {}), "range": y_range, "autorange": False}
    layout.update(uirevision="talk-traj", legend=dict(orientation="h", y=-0.18))
    return {**out, "highlight": len(paths)}


def regimes_figure(regimes, names=("u₁", "u₂")) -> dict:
    # the slider's u is a line the page lays over the chart (#talk-regimes-now): moving a plotly
    # shape would redraw the chart on every slider step
    fig = nfe_regimes_figure(regimes, title=f"NFE of the adaptive solvers against u₁ ({names[1]} 0)")
    fig.update_layout(xaxis_title=f"control u ({names[0]})")  # the model's own name for its first axis
    return figure_json(fig, 440)


def comparison_figures(comparison, paths, explained) -> dict:
    a, b = paths
    path_fig = pca_paths_figure(
        [b], dims=2, explained_variance=explained, highlight=[a], title="Both paths on the PCA map (fixed A black)"
    )
    div_fig = divergence_figure(comparison, title="Divergence of A from B along τ")
    c = comparison
    label = (
        f"u = ({signed(float(c.a.u[0]))}, {style_name(float(c.a.u[1]))}): A = {c.a.solver_label} "
        f"(NFE {c.a.nfe}) against B = {c.b.solver_label} (NFE {c.b.nfe}); final divergence at τ = 1: "
        f"{c.final_divergence:.4%}"
    )
    return {"paths": figure_json(path_fig, 400), "divergence": figure_json(div_fig, 400), "label": label}


def regimes_reading(regimes) -> str:
    switches = "; ".join(f"u = {s.u:+.2f} ({s.from_level:g} → {s.to_level:g} NFE)" for s in regimes.switches)
    text = f"Regime switches of dopri5: {switches or 'none (one level everywhere)'}. "
    if regimes.crossover_u is not None:
        text += (
            f"Semantic crossover ({regimes.targets[0]!r} overtakes {regimes.targets[1]!r}): "
            f"u = {regimes.crossover_u:+.2f}. "
        )
    text += regimes.reading
    return text


def prompt_payload(talk, data, x_range, y_range) -> dict:
    names = tuple(a["name"] for a in axis_words(data))
    explained = data.explained_variance
    ref_points = [p.points for p in data.reference_paths]
    ref_u = [p.u for p in data.reference_paths]
    points = []
    for row in talk.points:
        points.append(
            [
                {
                    "u": [p.sentiment, p.style],
                    "text": p.continuation,
                    "score": p.score,
                    "classifier": p.classifier_positive,
                    "vader": p.vader_compound,
                    "verdict": p.verdict,
                    "nfe": p.solve_nfe,
                    "path": [q[:2] for q in p.path],
                    "steer": steer_parts(p, ref_points, ref_u, explained)["patch"],
                }
                for p in row
            ]
        )
    return {
        "prompt": talk.prompt,
        "shown": talk.prompt_shown,
        "notice": talk.notice,
        "tau": talk.tau,
        "solver": talk.solver_label,
        "points": points,
        "traj": [
            trajectories_figure(talk, k, data.sentiments, explained, x_range, y_range, names)
            for k in range(len(data.styles))
        ],
        "regimes": regimes_figure(talk.regimes, names),
        "regimesReading": regimes_reading(talk.regimes),
        "compare": [
            [comparison_figures(c, paths, explained) for c, paths in zip(row, path_row)]
            for row, path_row in zip(talk.comparisons, talk.comparison_paths)
        ],
    }


def payload(data) -> dict:
    """Everything the page's script reads, as plain JSON-able data."""
    everything = [np.asarray(p.path) for t in data.prompts for row in t.points for p in row]
    x_range, y_range = _extent(everything)
    first = data.prompts[0].points[list(data.styles).index(0.0) if 0.0 in data.styles else 0]
    middle = first[int(np.argmin([abs(s) for s in data.sentiments]))]
    base = steer_parts(
        middle, [p.points for p in data.reference_paths], [p.u for p in data.reference_paths], data.explained_variance
    )
    base["layout"].update(height=470)
    axes = list(getattr(data, "axes", None) or [])
    return compact(
        {
            **({"scoreLabel": axes[0]["positive"]} if axes else {}),  # a user model's first axis's positive end
            "sentiments": list(data.sentiments),
            "styles": list(data.styles),
            "compareSentiments": list(data.compare_sentiments),
            "template": _template(),
            "steer": {"refs": base["data"][1:-2], "layout": base["layout"]},
            "prompts": [prompt_payload(t, data, x_range, y_range) for t in data.prompts],
            **({"pair": data.pair} if getattr(data, "pair", None) else {}),  # a second model's text, beside
        }
    )


# ---------------------------------------------------------------- the footer
def _number(x) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return html.escape(str(x))
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.4g}"


def evaluation_html(evaluation: dict | None) -> str:
    if not evaluation or not evaluation.get("values"):
        note = (evaluation or {}).get("note") or "no stored evaluation"
        return f"<p>No stored <code>evaluate</code> figures for this checkpoint: {html.escape(note)}.</p>"
    values = evaluation["values"]
    rows = []
    keys = [k for k in EVALUATION_LABELS if k in values] + [k for k in values if k not in EVALUATION_LABELS]
    for key in keys:
        value = values[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            label = EVALUATION_LABELS.get(key, key)
            rows.append(
                f"<tr><td>{html.escape(label)}</td><td class=num>{_number(value)}</td>"
                f"<td><code>{html.escape(key)}</code></td></tr>"
            )
    quick = " (a quick run: tiny sizes, a smoke test only)" if evaluation.get("quick") else ""
    return (
        f"<p>The <code>evaluate</code> figures stored in <code>{html.escape(str(evaluation['source']))}</code>"
        f"{quick}, as measured by <code>python -m steering experiments</code> (nothing was re-run to make "
        f"this file):</p><table id=talk-evaluation><tbody>{''.join(rows)}</tbody></table>"
    )


def footer_html(data) -> str:
    m, s = data.model, data.settings
    alpha = f"; α = {m['alpha']:.3g}" if m.get("alpha") is not None else ""
    training = m.get("training") or {}
    targets = html.escape(" / ".join(map(repr, s["regime_targets"])))
    made_by = (
        ""
        if getattr(data, "made_by_cli", True)
        else " the lab's “Build offline demo” button (steering.lab.talk.talk_html_bytes); the same file from a shell"
    )
    trained = ("; trained " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in training.items())) if training else ""
    first, second = axis_words(data)
    u2_name = html.escape(second["name"])
    judged = (
        f"Judged by the judge trained on the model's file for {html.escape(first['name'])}: its P("
        f"{html.escape(first['positive'])})."
        if getattr(data, "axes", None)
        else "Judged by the lab's judge (the trained TF-IDF classifier's P(positive) where its files exist, else "
        "VADER mapped to 0…1)."
    )
    return f"""
<h2>About this file</h2>
<p id=talk-model><b>Model</b>: <code>{html.escape(str(m["checkpoint"]))}</code>:
{html.escape(m["text"] + alpha + trained)}.</p>
<p><b>How the views were made</b>: seed {s["seed"]} at every control (so only u changes the text), {s["new_tokens"]} new
tokens, temperature {s["temperature"]:g}, top-k {s["top_k"]} next-token bars; {html.escape(s["grid_solver"])}
(the lab's default) for the text, bars and paths, on a grid of u₁ from −2 to +2 in steps of 0.1 and u₂ ∈ {{−1, 0, +1}}.
{judged} The PCA map is the lab's: fitted on the reference prompts ({html.escape(s["map_solver"])}); thin lines in the
first chart: {html.escape(repr(s["map_reference"]))} at fixed u. NFE sweep: dopri5 and adaptive_heun at rtol
{s["regime_rtol"]:g}, atol {s["regime_atol"]:g}, {s["regime_points"]} values of u₁ at {u2_name} 0, targets {targets}.
Fixed against adaptive: {html.escape(s["grid_solver"])} against {html.escape(s["adaptive_solver"])} at u₁ ∈
{{{", ".join(signed(u, 0) for u in data.compare_sentiments)}}} (the chart shows the nearest).</p>
<h3>Evaluation</h3>
{evaluation_html(data.evaluation)}
<p><b>Made by</b>{made_by}: <code id=talk-command>{html.escape(data.command)}</code>
(computing took {data.seconds:.1f} s).
plotly.js {html.escape(plotly_js_version())} is inlined; the page loads nothing from anywhere (its
Content-Security-Policy forbids it), so it works offline from a file.</p>"""


def plotly_js_version() -> str:
    import re

    found = re.search(r"plotly\.js v([0-9][0-9.]*)", plotly.offline.get_plotlyjs()[:400])
    return found.group(1) if found else "?"
