"""The offline talk demo's page: one self-contained HTML file around the data steering.figures.talk prepares
(its CSS, its script, the sliders and the footer). plotly.js is inlined and a Content-Security-Policy forbids
every load, so the file works from file:// with no network at all; the script only swaps precomputed pieces in
and calls Plotly.react.
"""

from __future__ import annotations

import html

import plotly

from .talk import axis_words, footer_html, payload, script_json, signed, style_name

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
    if (D.pair) {   // the second model at the same prompt and grid point
      var other = D.pair.prompts[state.p].points[state.st][state.s];
      $("talk-pair-shown").textContent = D.pair.prompts[state.p].shown;
      $("talk-pair-continuation").textContent = other.text;
      var badge = $("talk-pair-score");
      badge.textContent = "judged " + other.verdict + ": P(" + D.pair.scoreLabel + ") " +
        Math.round(100 * other.score) + "%  ·  NFE " + other.nfe;
      badge.className = "badge " + other.verdict;
    }
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
            f"<span>{html.escape(style_name(value))} {html.escape(names.get(value, ''))}</span></label>"
        )
    return "".join(out)


def _pair_card(data) -> str:
    """The second model's card (export-talk --compare-with), filled by the script at every control."""
    pair = getattr(data, "pair", None)
    if not pair:
        return ""
    name = html.escape(pair["checkpoint"])
    return (
        f"<h2>Beside it: <code>{name}</code> (u₁ = {html.escape(pair['axes'][0])}), same prompt, seed and control</h2>"
        "<div class=card id=talk-pair><p><b id=talk-pair-shown></b><span id=talk-pair-continuation></span></p></div>"
        "<div class=badges><span id=talk-pair-score class=badge></span></div>"
    )


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
        f"<span>{signed(lo, 0)} {html.escape(first['negative'])}</span><span>0</span>"
        f"<span>{signed(hi, 0)} {html.escape(first['positive'])}</span>"
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
{_pair_card(data)}
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
