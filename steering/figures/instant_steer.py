"""The Steer page's instant view: a sentiment slider whose every position is already in the browser.

Once the page has computed the whole sentiment range (steering/lab/prefetch.py works it out in the
background), moving the slider needs no server round trip: the browser swaps the text, the badges,
the next-token bars and the path in the PCA map from data it holds. Positions not computed yet are
asked of the server, which the component tells through its `sentiment` state, as a Streamlit widget
would. Plain data in (`instant_payload`); the HTML, CSS and JavaScript below draw it with SVG, not
plotly, so a move redraws a few dozen elements and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .steer import CURRENT, NEGATIVE, NEUTRAL, POSITIVE, _u_color, display_token

COMPONENT_NAME = "steering_lab.instant_steer"
TONES = {"positive": POSITIVE, "negative": NEGATIVE, "neutral": "inherit"}


def position_key(u: float) -> str:
    """The key of a slider position in the payload: u to two decimals, signed ("+0.50", "-1.25")."""
    return f"{float(u) + 0.0:+.2f}"


def instant_view(
    prompt_shown: str,
    continuation: str,
    badges: Sequence[tuple[str, str]],
    tokens: Sequence[str],
    probs: Sequence[float],
    path: np.ndarray,
    notice: str = "",
    stations=None,
) -> dict:
    """One slider position as the browser draws it: badges as (text, tone) pairs (tone: positive,
    negative or neutral), tokens made visible and sorted by probability, the path as [T, 2] floats,
    and the solver's stations on it (its step ends, [S, 2]; none for a path with no solver)."""
    path = np.asarray(path, dtype=float)
    if path.ndim != 2 or path.shape[1] < 2:
        raise ValueError(f"a path must be [T, ≥2], got shape {path.shape}")
    order = np.argsort(-np.asarray(probs, dtype=float), kind="stable")
    return {
        "prompt": prompt_shown,
        "text": continuation,
        "badges": [[str(text), TONES.get(tone, TONES["neutral"])] for text, tone in badges],
        "notice": notice,
        "tokens": [display_token(tokens[i]) for i in order],
        "probs": [round(float(probs[i]), 5) for i in order],
        "path": np.round(path[:, :2], 5).tolist(),
        "stations": np.round(np.asarray(stations, dtype=float).reshape(-1, path.shape[1])[:, :2], 5).tolist()
        if stations is not None and len(stations)
        else [],
    }


def instant_payload(
    views: Mapping[float, dict],
    reference_paths: Sequence[np.ndarray],
    reference_u: Sequence[float],
    current_u: float,
    *,
    u_min: float,
    u_max: float,
    u_step: float,
    explained: Sequence[float] | None = None,
    font_size: int = 14,
    label: str = "Sentiment u₁",
    help_text: str = "",
    pending: int = 0,
    serial: int = 0,
    chart_height: str = "380px",
    fit_screen: bool = False,
) -> dict:
    """Everything the component draws: the computed positions (u -> instant_view), the reference
    paths (thin, coloured by u) and the map's fixed extent, so moving u moves only the current path."""
    paths = [np.asarray(p, dtype=float)[:, :2] for p in reference_paths]
    current_paths = [np.asarray(v["path"], dtype=float) for v in views.values()]
    everything = np.concatenate(paths + current_paths) if paths or current_paths else np.zeros((1, 2))
    (x_lo, y_lo), (x_hi, y_hi) = everything.min(axis=0), everything.max(axis=0)
    pad_x, pad_y = 0.08 * max(x_hi - x_lo, 1e-6), 0.08 * max(y_hi - y_lo, 1e-6)
    u_abs = max([abs(float(u)) for u in reference_u] + [1e-9])
    ex = list(explained) if explained is not None else []
    return {
        "views": {position_key(u): v for u, v in views.items()},
        "reference": [
            {"u": float(u), "color": _u_color(float(u), u_abs), "path": np.round(p, 5).tolist()}
            for p, u in zip(paths, reference_u)
        ],
        "extent": [float(x_lo - pad_x), float(x_hi + pad_x), float(y_lo - pad_y), float(y_hi + pad_y)],
        "axes": [
            f"PC1 ({ex[0]:.0%} of variance)" if len(ex) > 0 else "PC1",
            f"PC2 ({ex[1]:.0%} of variance)" if len(ex) > 1 else "PC2",
        ],
        "current": position_key(current_u),
        "u_min": u_min,
        "u_max": u_max,
        "u_step": u_step,
        "font_size": font_size,
        "label": label,
        "help": help_text,
        "pending": int(pending),
        "serial": int(serial),
        "chart_height": chart_height,
        "fit_screen": fit_screen,
        "colors": {"negative": NEGATIVE, "neutral": NEUTRAL, "positive": POSITIVE, "current": CURRENT},
    }


HTML = """
<div class="instant" data-testid="instant-steer">
  <div class="head"><label for="instant-u" class="label"></label><span class="uval"></span>
    <span class="status"></span></div>
  <input id="instant-u" class="slider" type="range">
  <div class="text" data-testid="instant-text"></div>
  <div class="badges"></div>
  <div class="charts" data-testid="instant-charts">
    <div class="chart bars"><div class="title"></div><svg class="bars-svg"></svg></div>
    <div class="chart map"><div class="title">H(τ) in the PCA map (mean over tokens)</div>
      <svg class="map-svg"></svg></div>
  </div>
  <div class="save"><button class="save-png" title="The two charts as a 1920x1080 PNG slide">PNG</button>
    <button class="save-svg" title="The two charts as a 1920x1080 SVG">SVG</button></div>
</div>
"""

CSS = """
.instant { font-family: Inter, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--st-text-color, #111); }
.head { display: flex; gap: .6em; align-items: baseline; }
.label { font-size: .9em; }
.uval { font-weight: 600; font-variant-numeric: tabular-nums; }
.status { color: #888; font-size: .85em; }
.slider { width: 100%; accent-color: var(--st-primary-color, #1f6fb4); margin: .2em 0 .5em; }
.text { border: 1px solid rgba(128,128,128,.3); border-radius: .5em; padding: .5em 1em; line-height: 1.5;
        min-height: 2.6em; white-space: pre-wrap; }
.text.stale { opacity: .45; }
.badges { margin: .5em 0; font-size: .95em; }
.badge { display: inline-block; padding: .1em .55em; border-radius: .8em; margin-right: .5em;
         background: rgba(128,128,128,.12); }
.charts { display: flex; gap: 2%; }
.chart .title { font-size: 1.05em; margin: .3em 0; }
.bars { width: 34%; } .map { width: 64%; }
.chart svg { width: 100%; height: var(--chart-height, 380px); overflow: visible; }
.save { text-align: right; }
.save button { font: inherit; font-size: .8em; border: 1px solid rgba(128,128,128,.4); border-radius: .4em;
               background: transparent; color: inherit; padding: .1em .7em; margin-left: .4em; cursor: pointer; }
.chart text { fill: currentColor; font-size: .8em; }
"""

# the drawing both instant views share (this page's and the Compare page's, steering/figures/instant_compare.py)
DRAWING_JS = r"""
const SVG = "http://www.w3.org/2000/svg";
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function key(u) { const v = Math.round(u * 100) / 100 + 0; return (v >= 0 ? "+" : "") + v.toFixed(2); }

function drawBars(svg, view, title) {
  svg.replaceChildren();
  const W = svg.clientWidth || 300, H = svg.clientHeight || 380, left = 0.45 * W, n = view.tokens.length;
  const top = Math.min(1, Math.ceil(Math.max((view.probs[0] || 0) * 1.25, 0.1) * 10) / 10);
  const rowH = Math.min(H / Math.max(n, 1), 36);
  view.tokens.forEach((tok, i) => {
    const p = view.probs[i], y = i * rowH;
    el("rect", {x: left, y: y + rowH * 0.15, width: Math.max(1, (W - left) * p / top), height: rowH * 0.7,
                fill: "#1f6fb4"}, svg);
    const t = el("text", {x: left - 6, y: y + rowH * 0.62, "text-anchor": "end"}, svg);
    t.textContent = tok + "  " + (100 * p).toFixed(1) + "%";
  });
  title.textContent = "Next token at u = " + view.key;
}

function drawMap(svg, data, view) {
  const W = svg.clientWidth || 600, H = svg.clientHeight || 380, [x0, x1, y0, y1] = data.extent;
  const sx = x => 40 + (W - 50) * (x - x0) / (x1 - x0), sy = y => H - 30 - (H - 40) * (y - y0) / (y1 - y0);
  const line = pts => pts.map(p => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ");
  let base = svg.querySelector("g.base");
  const shape = data.extent.join() + " " + W + "x" + H;
  if (!base || svg.__extent !== shape) {   // the backdrop: drawn once per payload shape
    svg.replaceChildren();
    base = el("g", {class: "base"}, svg);
    el("rect", {x: 40, y: 10, width: W - 50, height: H - 40, fill: "none", stroke: "rgba(128,128,128,.3)"}, base);
    for (const r of data.reference)
      el("polyline", {points: line(r.path), fill: "none", stroke: r.color, "stroke-width": 2, opacity: 0.55}, base);
    const ax = el("text", {x: 40 + (W - 50) / 2, y: H - 6, "text-anchor": "middle"}, base);
    ax.textContent = data.axes[0];
    const ay = el("text", {x: 12, y: 10 + (H - 40) / 2, "text-anchor": "middle",
                           transform: "rotate(-90 12 " + (10 + (H - 40) / 2) + ")"}, base);
    ay.textContent = data.axes[1];
    el("polyline", {class: "now", fill: "none", stroke: data.colors.current, "stroke-width": 5}, svg);
    el("g", {class: "stations"}, svg);
    el("circle", {class: "start", r: 5, fill: data.colors.current}, svg);
    el("circle", {class: "end", r: 8, stroke: data.colors.current, "stroke-width": 1.5}, svg);
    svg.__extent = shape;
  }
  const now = svg.querySelector("polyline.now"), start = svg.querySelector("circle.start"),
        end = svg.querySelector("circle.end");
  now.setAttribute("points", line(view.path));
  now.setAttribute("data-u", view.key);
  const stations = svg.querySelector("g.stations");   // where the solver stood: its step ends
  stations.replaceChildren();
  for (const p of view.stations || [])
    el("circle", {cx: sx(p[0]), cy: sy(p[1]), r: 4.5, fill: "#ffffff", stroke: data.colors.current,
                  "stroke-width": 2}, stations);
  const a = view.path[0], b = view.path[view.path.length - 1];
  start.setAttribute("cx", sx(a[0])); start.setAttribute("cy", sy(a[1]));
  end.setAttribute("cx", sx(b[0])); end.setAttribute("cy", sy(b[1]));
  const u = parseFloat(view.key);
  end.setAttribute("fill", u > 0 ? data.colors.positive : u < 0 ? data.colors.negative : data.colors.neutral);
}
"""

JS = (
    DRAWING_JS
    + r"""
function saveCharts(root, format) {
  // the two charts side by side on one 1920x1080 slide, styles inlined (the page's CSS stays behind)
  const W = 1920, H = 1080, out = document.createElementNS(SVG, "svg");
  out.setAttribute("xmlns", SVG); out.setAttribute("width", W); out.setAttribute("height", H);
  out.setAttribute("viewBox", "0 0 " + W + " " + H);
  el("rect", {width: W, height: H, fill: "#ffffff"}, out);
  const style = el("style", {}, out);
  style.textContent = "text { font-family: Inter, Segoe UI, Helvetica, Arial, sans-serif; font-size: 13px; "
    + "fill: #111; }";
  let x = 40;
  for (const [sel, share] of [[".bars", 0.34], [".map", 0.62]]) {
    const chart = root.querySelector(sel), svg = chart.querySelector("svg"), w = svg.clientWidth || 300,
          h = svg.clientHeight || 380, box = el("svg", {x: x, y: 120, width: (W - 80) * share, height: H - 200,
          viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "xMidYMid meet", overflow: "visible"}, out);
    for (const child of svg.childNodes) box.appendChild(child.cloneNode(true));
    const title = el("text", {x: x, y: 80, style: "font-size: 26px"}, out);
    title.textContent = chart.querySelector(".title").textContent;
    x += (W - 80) * share + 40;
  }
  const text = new XMLSerializer().serializeToString(out);
  const download = (blob) => {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob); a.download = "steering-steer." + format;
    root.appendChild(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  };
  if (format === "svg") return download(new Blob([text], {type: "image/svg+xml"}));
  const img = new Image(), canvas = document.createElement("canvas");
  canvas.width = W; canvas.height = H;
  img.onload = () => { canvas.getContext("2d").drawImage(img, 0, 0, W, H); canvas.toBlob(download, "image/png"); };
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
}

function fitScreen(root) {
  // presenter mode: the charts take the height the rest of the page leaves them, so nothing scrolls
  const fit = () => {
    const main = document.querySelector('[data-testid="stMain"]'),
          block = main && main.querySelector('[data-testid="stMainBlockContainer"]'),
          svg = root.querySelector(".map-svg");
    if (!block || !svg) return;
    const over = block.getBoundingClientRect().height - main.clientHeight;
    const height = Math.max(120, Math.min(560, svg.getBoundingClientRect().height - over - 4));
    if (Math.abs(height - svg.getBoundingClientRect().height) > 2) {
      root.__fitted = height + "px";
      root.style.setProperty("--chart-height", root.__fitted);
      if (root.__state && root.__state.shown) root.__state.redraw();
    }
  };
  requestAnimationFrame(fit);
  if (!root.__fitting) {
    root.__fitting = true;
    window.addEventListener("resize", () => requestAnimationFrame(fit));
  }
}

export default function (component) {
  const { data, parentElement, setStateValue, setTriggerValue } = component;
  const root = parentElement.querySelector(".instant");
  const slider = root.querySelector(".slider"), text = root.querySelector(".text"),
        badges = root.querySelector(".badges"), uval = root.querySelector(".uval"),
        status = root.querySelector(".status");
  const st = root.__state || (root.__state = {timer: null, shown: null, serverCurrent: null});
  st.data = data;
  // a timer that fires once the component is gone (a talk step or the sidebar switched page) would ask the server to
  // rerun a fragment the new page does not have; CI saw the page left blank after one ("Couldn't find fragment")
  st.live = true;
  root.querySelector(".label").textContent = data.label;
  root.querySelector(".label").title = data.help;
  root.style.fontSize = data.font_size + "px";
  root.style.setProperty("--chart-height", data.fit_screen && root.__fitted ? root.__fitted : data.chart_height);
  if (data.fit_screen) fitScreen(root);
  // while the server computes the range, ask it for what is new: each answer (a fragment rerun that
  // waits briefly for more) brings a new serial, and that asks again until nothing is pending
  if (data.pending && st.polled !== data.serial) {
    st.polled = data.serial;
    setTimeout(() => st.live && setTriggerValue("poll", data.serial), 30);
  }
  slider.min = data.u_min; slider.max = data.u_max; slider.step = data.u_step;
  // the server's position wins only when the server moved it (a URL, a talk step), not when it lags
  if (data.current !== st.serverCurrent) {
    st.serverCurrent = data.current;
    // (inside the component's shadow root, document.activeElement is the host: ask the root)
    if (st.shown === null || root.getRootNode().activeElement !== slider) slider.value = parseFloat(data.current);
  }

  function show(u) {
    const k = key(u), view = st.data.views[k];
    uval.textContent = k;
    status.textContent = st.data.pending ? "computing the rest of the range…" : "";
    if (!view) { text.classList.add("stale"); status.textContent = "computing u = " + k + "…"; return false; }
    view.key = k;
    text.classList.remove("stale");
    text.replaceChildren();
    const b = document.createElement("b"); b.textContent = view.prompt; text.appendChild(b);
    text.appendChild(document.createTextNode(view.text));
    text.dataset.u = k;
    badges.replaceChildren();
    for (const [label, colour] of view.badges) {
      const b = document.createElement("span"); b.className = "badge"; b.textContent = label;
      b.style.color = colour; badges.appendChild(b);
    }
    if (view.notice) { const n = document.createElement("div"); n.textContent = view.notice; badges.appendChild(n); }
    drawBars(root.querySelector(".bars-svg"), view, root.querySelector(".bars .title"));
    drawMap(root.querySelector(".map-svg"), st.data, view);
    st.shown = k;
    return true;
  }

  st.redraw = () => show(parseFloat(slider.value));

  function tellServer(u, now) {
    clearTimeout(st.timer);
    // the server only needs the position for the URL and the other pages; a position it has not
    // computed yet is asked for at once, a computed one after the drag settles
    st.timer = setTimeout(() => st.live && setStateValue("sentiment", parseFloat(key(u))), now ? 0 : 350);
  }

  if (!st.bound) {
    slider.addEventListener("input", () => {
      const u = parseFloat(slider.value);
      tellServer(u, !show(u));
    });
    root.querySelector(".save-png").addEventListener("click", () => saveCharts(root, "png"));
    root.querySelector(".save-svg").addEventListener("click", () => saveCharts(root, "svg"));
    st.bound = true;
  }
  show(parseFloat(slider.value));
  return () => { st.live = false; };  // Streamlit calls it when the component unmounts
}
"""
)
