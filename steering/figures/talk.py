"""The offline talk demo as one self-contained HTML file (plain data in, HTML text out; no model here).

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


def _signed(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def _style_name(x: float) -> str:
    return "0" if x == 0 else _signed(x, 0)


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
    bars_title = f"Next token at u = ({_signed(point.sentiment)}, {_style_name(point.style)})"
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
        title=f"Every {names[0]} path at {names[1]} {_style_name(row[0].style)}, animated over τ",
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
        f"u = ({_signed(float(c.a.u[0]))}, {_style_name(float(c.a.u[1]))}): A = {c.a.solver_label} "
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
{{{", ".join(_signed(u, 0) for u in data.compare_sentiments)}}} (the chart shows the nearest).</p>
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


# ---------------------------------------------------------------- the page
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
    "font-src 'none'; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
)

STYLE = """
:root { --neg: #c0392b; --pos: #1f6fb4; --mid: #7f8c8d; --ink: #1d2329; --line: #dfe3e8; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1400px; padding: 18px 28px 40px; color: var(--ink);
       font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
h1 { font-size: 1.9rem; margin: 0.2rem 0; } h2 { font-size: 1.35rem; margin: 2rem 0 0.4rem; }
.sub, .note { color: #555; } .note { font-size: 0.9rem; }
#controls { display: grid; grid-template-columns: minmax(220px, 1fr) 2fr auto; gap: 18px 28px; align-items: end;
            position: sticky; top: 0; background: #fff; padding: 10px 0; z-index: 5;
            border-bottom: 1px solid var(--line); }
#controls label, #talk-style legend { font-weight: 600; display: block; margin-bottom: 4px; }
select { font: inherit; padding: 4px 6px; width: 100%; }
input[type=range] { width: 100%; accent-color: #333; }
.scale { display: flex; justify-content: space-between; font-size: 0.85rem; color: #666; }
#talk-style { border: 0; margin: 0; padding: 0; display: flex; gap: 0; flex-wrap: wrap; align-items: center; }
#talk-style legend { width: 100%; }
#talk-style label { display: inline-block; font-weight: 400; border: 1px solid #999; padding: 4px 12px; cursor: pointer;
                    margin: 0 -1px 0 0; user-select: none; }
#talk-style input { position: absolute; opacity: 0; pointer-events: none; }
#talk-style input:checked + span { font-weight: 700; }
#talk-style label:has(input:checked) { background: #333; color: #fff; }
output { font-variant-numeric: tabular-nums; font-weight: 700; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin: 16px 0 8px; font-size: 1.15rem;
        min-height: 5.5em; }
.badges { display: flex; gap: 8px; flex-wrap: wrap; }
.badge { border-radius: 6px; padding: 2px 10px; background: #eceff1; font-variant-numeric: tabular-nums; }
.badge.positive { background: #dbe9f6; color: var(--pos); } .badge.negative { background: #f7dedb; color: var(--neg); }
.badge.mixed { background: #eceff1; color: #444; }
.chart { width: 100%; min-height: 300px; }
.overlay { position: relative; }
.now-line { position: absolute; display: none; width: 0; border-left: 2px solid #111; pointer-events: none; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.row { display: flex; gap: 14px; align-items: center; }
button { font: inherit; padding: 4px 14px; cursor: pointer; }
#talk-tau { font-variant-numeric: tabular-nums; min-width: 8em; }
footer { margin-top: 2.5rem; border-top: 1px solid var(--line); font-size: 0.92rem; }
table { border-collapse: collapse; } td { padding: 2px 12px 2px 0; border-bottom: 1px solid #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.9em; background: #f5f6f7; padding: 0 3px; word-break: break-word; }
@media (max-width: 900px) { #controls, .two { grid-template-columns: 1fr; } }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("talk-data").textContent);
  var CONFIG = {displaylogo: false, responsive: true, typesetMath: false, showSendToCloud: false, showTips: false};
  var FRAME_MS = 90;
  function $(id) { return document.getElementById(id); }
  function signed(x, digits) { return (x < 0 ? "\u2212" : "+") + Math.abs(x).toFixed(digits); }
  function nearest(values, x) {
    var best = 0;
    for (var i = 1; i < values.length; i++) if (Math.abs(values[i] - x) < Math.abs(values[best] - x)) best = i;
    return best;
  }
  function withTemplate(layout) { return Object.assign({}, layout, {template: D.template}); }
  function clone(x) { return JSON.parse(JSON.stringify(x)); }

  var slider = $("talk-sentiment"), select = $("talk-prompt");
  var opened = document.querySelector("input[name=talk-style]:checked");
  var state = {p: 0, s: nearest(D.sentiments, parseFloat(slider.value)),
               st: nearest(D.styles, opened ? parseFloat(opened.value) : 0),
               frame: null, compareKey: null, trajKey: null, pending: false, anim: null};

  function P() { return D.prompts[state.p]; }
  function point() { return P().points[state.st][state.s]; }

  function renderText() {
    var pt = point();
    $("talk-prompt-shown").textContent = P().shown;
    $("talk-continuation").textContent = pt.text;
    var score = $("talk-score");
    score.textContent = "judged " + pt.verdict + ": P(" + (D.scoreLabel || "positive") + ") " +
      Math.round(100 * pt.score) + "%";
    score.className = "badge " + pt.verdict;
    score.dataset.score = String(pt.score);
    $("talk-vader").textContent = "VADER " + signed(pt.vader, 2);
    $("talk-nfe").textContent = "NFE of one solve: " + pt.nfe + " (" + P().solver + ")";
    $("talk-sentiment-value").textContent = signed(D.sentiments[state.s], 1);
    $("talk-notice").textContent = P().notice || "";
  }

  function renderSteer() {
    var patch = point().steer;
    Plotly.react("talk-steer", [patch.bars].concat(D.steer.refs, [patch.now, patch.ends]),
                 withTemplate(Object.assign({}, D.steer.layout, patch.layout)), CONFIG);
  }

  function trajData(k) {
    var F = P().traj[state.st], pt = point(), tau = P().tau, h = F.highlight;
    return F.data.map(function (t, i) {
      // always a copy: plotly keeps the objects it is given and later steps write into them
      var tr = Object.assign({}, t);
      if (i === h) {
        var label = "now (u=" + signed(pt.u[0], 2) + ")";
        tr = Object.assign({}, t, {x: pt.path.map(function (q) { return q[0]; }),
                                   y: pt.path.map(function (q) { return q[1]; }),
                                   hovertext: pt.path.map(function (q, j) {
                                     return label + "<br>\u03c4=" + tau[j].toFixed(3); }),
                                   name: "now: the slider's u"});
      }
      if (k < tau.length && i <= h) {
        tr = Object.assign({}, tr, {x: tr.x.slice(0, k), y: tr.y.slice(0, k),
                                    hovertext: tr.hovertext ? tr.hovertext.slice(0, k) : tr.hovertext});
      }
      return tr;
    });
  }

  var MOVE = {mode: "immediate", transition: {duration: 0}, frame: {duration: 0, redraw: false}};

  function renderTraj() {
    var tau = P().tau, k = state.frame === null ? tau.length : state.frame, F = P().traj[state.st];
    var data = trajData(k), key = state.p + ":" + state.st;
    if (key !== state.trajKey) {
      state.trajKey = key;
      Plotly.react("talk-traj", data, withTemplate(F.layout), CONFIG);
    } else {
      // the axes are fixed, so only paths move: plotly's animation step redraws just those traces
      // (the current path on a slider step, every path on a frame of Play)
      var moved = [];
      for (var i = 0; i <= (state.anim ? F.highlight : 0); i++) moved.push(state.anim ? i : F.highlight);
      var done = Plotly.animate("talk-traj", {data: moved.map(function (i) { return data[i]; }), traces: moved}, MOVE);
      if (done && done.catch) done.catch(function () {});
    }
    $("talk-tau").textContent = state.frame === null ? "\u03c4 = 0 \u2192 1" : "\u03c4 = " + tau[k - 1].toFixed(3);
    $("talk-traj").dataset.frame = String(k);
  }

  function renderRegimesMarker() {
    // a line laid over the chart at the slider's u, placed with the chart's own x axis (no redraw)
    var gd = $("talk-regimes"), line = $("talk-regimes-now"), full = gd._fullLayout, u = D.sentiments[state.s];
    if (!full || !full.xaxis || !full.yaxis || !full.xaxis.l2p) { line.style.display = "none"; return; }
    line.style.left = (full.xaxis._offset + full.xaxis.l2p(u) - 1) + "px";
    line.style.top = full.yaxis._offset + "px";
    line.style.height = full.yaxis._length + "px";
    line.style.display = "block";
    line.dataset.u = String(u);
  }

  function renderRegimes() {
    var R = clone(P().regimes), gd = $("talk-regimes");
    Plotly.react(gd, R.data, withTemplate(R.layout), CONFIG);
    if (!gd.dataset.listening) {
      gd.on("plotly_afterplot", renderRegimesMarker);
      gd.dataset.listening = "1";
    }
    $("talk-regimes-reading").textContent = P().regimesReading;
    renderRegimesMarker();
  }

  function renderCompare() {
    var c = nearest(D.compareSentiments, D.sentiments[state.s]), key = state.p + ":" + state.st + ":" + c;
    if (key === state.compareKey) return;
    state.compareKey = key;
    var C = clone(P().compare[state.st][c]);
    Plotly.react("talk-compare-paths", C.paths.data, withTemplate(C.paths.layout), CONFIG);
    Plotly.react("talk-compare-divergence", C.divergence.data, withTemplate(C.divergence.layout), CONFIG);
    $("talk-compare-label").textContent = C.label;
  }

  function renderCharts() {
    state.pending = false;
    renderSteer();
    if (!state.anim) renderTraj();
    renderRegimesMarker();
    renderCompare();
  }

  function schedule() {
    if (state.pending) return;
    state.pending = true;
    requestAnimationFrame(renderCharts);
  }

  function onSentiment() {
    state.s = nearest(D.sentiments, parseFloat(slider.value));
    renderText();
    schedule();
  }

  function onStyle(event) {
    state.st = nearest(D.styles, parseFloat(event.target.value));
    renderText();
    if (!state.anim) { state.frame = null; }
    schedule();
  }

  function onPrompt() {
    stop();
    state.p = parseInt(select.value, 10) || 0;
    state.compareKey = null;
    state.frame = null;
    renderText();
    renderRegimes();
    renderCharts();
  }

  function stop() {
    if (state.anim) cancelAnimationFrame(state.anim);
    state.anim = null;
    $("talk-play").textContent = "\u25b6 Play";
    $("talk-play").setAttribute("aria-pressed", "false");
  }

  function play() {
    if (state.anim) { stop(); return; }
    var total = P().tau.length, last = -1e9;
    state.frame = 1;
    $("talk-play").textContent = "\u275a\u275a Pause";
    $("talk-play").setAttribute("aria-pressed", "true");
    function step(now) {
      if (now - last >= FRAME_MS) {
        last = now;
        renderTraj();
        if (state.frame >= total) { stop(); return; }
        state.frame += 1;
      }
      state.anim = requestAnimationFrame(step);
    }
    state.anim = requestAnimationFrame(step);
  }

  D.prompts.forEach(function (p, i) {
    var option = document.createElement("option");
    option.value = String(i);
    option.textContent = p.prompt;
    select.appendChild(option);
  });
  if (D.prompts.length < 2) select.disabled = true;
  select.addEventListener("change", onPrompt);
  slider.addEventListener("input", onSentiment);
  slider.addEventListener("change", onSentiment);
  Array.prototype.forEach.call(document.querySelectorAll("input[name=talk-style]"), function (radio) {
    radio.addEventListener("change", onStyle);
  });
  $("talk-play").addEventListener("click", play);

  renderText();
  renderRegimes();
  renderCharts();
  document.body.dataset.ready = "1";
})();
"""


def _style_controls(styles, ends: tuple[str, str] = ("critic blurb", "user review"), opening: float = 0.0) -> str:
    names = {-1.0: ends[0], 0.0: "either", 1.0: ends[1]}
    out = []
    for value in styles:
        checked = " checked" if value == opening else ""
        ident = f"talk-style-{'neg' if value < 0 else 'pos' if value > 0 else 'zero'}"
        out.append(
            f'<label for="{ident}"><input type=radio name=talk-style id="{ident}" value="{value:g}"{checked}>'
            f"<span>{html.escape(_style_name(value))} {html.escape(names.get(value, ''))}</span></label>"
        )
    return "".join(out)


def talk_html(data) -> str:
    """The whole page: controls, the precomputed views as JSON, plotly.js and the page's script."""
    lo, hi = min(data.sentiments), max(data.sentiments)
    step = round((hi - lo) / max(len(data.sentiments) - 1, 1), 6)
    title = "Steering a transformer whose middle layers are an ODE"
    # the control's words: the shipped model's, or a model's own axes (data.axes, trained with --data)
    first, second = axis_words(data)
    u1_name, u2_name = html.escape(first["name"]), html.escape(second["name"])
    u1_label = (
        f"{u1_name.capitalize()} u₁ = <output id=talk-sentiment-value for=talk-sentiment>"
        f"{getattr(data, 'opening', (0.0,))[0]:+.1f}</output>"
    )
    u1_ends = (
        f"<span>{_signed(lo, 0)} {html.escape(first['negative'])}</span><span>0</span>"
        f"<span>{_signed(hi, 0)} {html.escape(first['positive'])}</span>"
    )
    opening = tuple(getattr(data, "opening", (0.0, 0.0)))
    u2_controls = _style_controls(data.styles, (second["negative"], second["positive"]), opening[1])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}: offline demo</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{html.escape(title)}</h1>
<p class=sub>dH/dτ = α·F(H, τ, u), steered by u = ({u1_name} u₁, {u2_name} u₂). Every view below was computed
ahead by the model <code>{html.escape(str(data.model["checkpoint"]))}</code>; this page only looks them up, offline.</p>
</header>
<section id=controls>
<div><label for=talk-prompt>Prompt</label><select id=talk-prompt></select></div>
<div><label for=talk-sentiment>{u1_label}</label>
<input type=range id=talk-sentiment min="{lo:g}" max="{hi:g}" step="{step:g}" value="{opening[0]:g}"
 aria-label="{u1_name} u1">
<div class=scale>{u1_ends}</div></div>
<fieldset id=talk-style><legend>{u2_name.capitalize()} u₂</legend>{u2_controls}</fieldset>
</section>
<div class=card><p id=talk-text><b id=talk-prompt-shown></b><span id=talk-continuation></span></p></div>
<div class=badges><span id=talk-score class=badge></span><span id=talk-vader class=badge></span>
<span id=talk-nfe class=badge></span></div>
<p id=talk-notice class=note></p>
<div id=talk-steer class=chart></div>
<p class=note>Same seed at every u, so only the control changes the text. Thin lines: a reference prompt at fixed u
(red negative, blue positive); thick: this prompt at the slider's u.</p>
<h2>The flow over depth τ</h2>
<div class=row><button id=talk-play type=button aria-pressed=false>▶ Play</button>
<span id=talk-tau>τ = 0 → 1</span></div>
<div id=talk-traj class=chart></div>
<h2>Solver work against the control</h2>
<p id=talk-regimes-reading></p>
<div class=overlay><div id=talk-regimes class=chart></div><div id=talk-regimes-now class=now-line></div></div>
<p class=note>An adaptive solver's number of field evaluations (NFE) depends on u; the red dashed lines are every level
change of dopri5's NFE (an exact piecewise-constant fit), the black line the slider's u (the sweep is at style 0).</p>
<h2>Fixed against adaptive</h2>
<p id=talk-compare-label></p>
<div class=two><div id=talk-compare-paths class=chart></div><div id=talk-compare-divergence class=chart></div></div>
<footer id=talk-footer>{footer_html(data)}</footer>
<script id=talk-data type="application/json">{script_json(payload(data))}</script>
<script>{plotly.offline.get_plotlyjs()}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""
