"""The Compare page's instant view: one slider, two models, every computed position of both in the browser.

Each side is the Steer page's payload for one model (instant_steer.instant_payload: its views per slider
position, its own PCA map's reference paths and extent); a slider move redraws the text, badges, next-token
bars and map path of both sides in the same event handler, so both change in one frame. The drawing is the
Steer view's (instant_steer.DRAWING_JS); positions not computed yet are asked of the server as there.
"""

from __future__ import annotations

from collections.abc import Sequence

from .instant_steer import CSS as STEER_CSS
from .instant_steer import DRAWING_JS, position_key

COMPONENT_NAME = "steering_lab.instant_compare"


def compare_payload(
    sides: Sequence[dict],
    titles: Sequence[str],
    current_u: float,
    *,
    u_min: float,
    u_max: float,
    u_step: float,
    label: str,
    help_text: str = "",
    font_size: int = 14,
    pending: int = 0,
    serial: int = 0,
    chart_height: str = "300px",
) -> dict:
    """Two instant_payload()s (one per model) under one slider; titles name each side."""
    if len(sides) != 2 or len(titles) != 2:
        raise ValueError(f"a comparison has two sides, got {len(sides)} payloads and {len(titles)} titles")
    return {
        "sides": [{**side, "title": str(title)} for side, title in zip(sides, titles)],
        "current": position_key(current_u),
        "u_min": u_min,
        "u_max": u_max,
        "u_step": u_step,
        "label": label,
        "help": help_text,
        "font_size": font_size,
        "pending": int(pending),
        "serial": int(serial),
        "chart_height": chart_height,
    }


_SIDE = """
    <div class="side" data-side="{i}">
      <div class="name"></div>
      <div class="text" data-testid="compare-text-{i}"></div>
      <div class="badges"></div>
      <div class="charts">
        <div class="chart bars"><div class="title"></div><svg class="bars-svg"></svg></div>
        <div class="chart map"><div class="title">H(τ) in this model's PCA map</div><svg class="map-svg"></svg></div>
      </div>
    </div>"""

HTML = f"""
<div class="instant" data-testid="instant-compare">
  <div class="head"><label for="compare-u" class="label"></label><span class="uval"></span>
    <span class="status"></span></div>
  <input id="compare-u" class="slider" type="range">
  <div class="sides">{_SIDE.format(i=0)}{_SIDE.format(i=1)}
  </div>
</div>
"""

CSS = (
    STEER_CSS
    + """
.sides { display: flex; gap: 3%; }
.side { width: 48.5%; min-width: 0; }
.side .name { font-weight: 600; margin: .2em 0 .4em; }
.side .bars { width: 40%; } .side .map { width: 58%; }
"""
)

JS = (
    DRAWING_JS
    + r"""
export default function (component) {
  const { data, parentElement, setStateValue, setTriggerValue } = component;
  const root = parentElement.querySelector(".instant");
  const slider = root.querySelector(".slider"), uval = root.querySelector(".uval"),
        status = root.querySelector(".status"), sides = [...root.querySelectorAll(".side")];
  const st = root.__state || (root.__state = {timer: null, shown: null, serverCurrent: null});
  st.data = data;
  root.querySelector(".label").textContent = data.label;
  root.querySelector(".label").title = data.help;
  root.style.fontSize = data.font_size + "px";
  root.style.setProperty("--chart-height", data.chart_height);
  // while either model's range is computed, ask for what is new; a poll sent while the page's full run still
  // computes the figures below is dropped by the server, so one with no answer is sent again
  if (data.pending && st.polled !== data.serial) {
    st.polled = data.serial;
    const ask = (tries) => {
      if (st.data.serial !== data.serial) return;   // answered
      setTriggerValue("poll", data.serial);
      if (tries < 600) setTimeout(() => ask(tries + 1), 2000);
    };
    setTimeout(() => ask(0), 30);
  }
  slider.min = data.u_min; slider.max = data.u_max; slider.step = data.u_step;
  if (data.current !== st.serverCurrent) {
    st.serverCurrent = data.current;
    if (st.shown === null || root.getRootNode().activeElement !== slider) slider.value = parseFloat(data.current);
  }

  function showSide(el, side, k) {
    el.querySelector(".name").textContent = side.title;
    const view = side.views[k], text = el.querySelector(".text"), badges = el.querySelector(".badges");
    if (!view) { text.classList.add("stale"); return false; }
    view.key = k;
    text.classList.remove("stale");
    text.replaceChildren();
    const b = document.createElement("b"); b.textContent = view.prompt; text.appendChild(b);
    text.appendChild(document.createTextNode(view.text));
    text.dataset.u = k;
    badges.replaceChildren();
    for (const [label, colour] of view.badges) {
      const s = document.createElement("span"); s.className = "badge"; s.textContent = label;
      s.style.color = colour; badges.appendChild(s);
    }
    if (view.notice) { const n = document.createElement("div"); n.textContent = view.notice; badges.appendChild(n); }
    drawBars(el.querySelector(".bars-svg"), view, el.querySelector(".bars .title"));
    drawMap(el.querySelector(".map-svg"), side, view);
    return true;
  }

  function show(u) {
    // both sides in one handler: the browser paints them in the same frame
    const k = key(u);
    uval.textContent = k;
    let all = true;
    st.data.sides.forEach((side, i) => { all = showSide(sides[i], side, k) && all; });
    status.textContent = all ? (st.data.pending ? "computing the rest of the range…" : "") : "computing u = " + k + "…";
    st.shown = k;
    return all;
  }

  function tellServer(u, now) {
    clearTimeout(st.timer);
    st.timer = setTimeout(() => setStateValue("sentiment", parseFloat(key(u))), now ? 0 : 350);
  }

  if (!st.bound) {
    slider.addEventListener("input", () => {
      const u = parseFloat(slider.value);
      tellServer(u, !show(u));
    });
    st.bound = true;
  }
  show(parseFloat(slider.value));
}
"""
)
