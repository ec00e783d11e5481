"""Links, the talk script and presenter mode in a real browser (Debian's chromium, one app server).

- every page opens by its path and by ?page=NAME with no "Page not found" dialog, routed by app.py, the
  very first session after the server starts included (Streamlit runs it in its old pages/ mode:
  lab_ui.widgets.run_through_app);
- assets/talks/paper-in-8-steps.json stepped through with PageDown (what presentation clickers
  send) and back with PageUp: each step shows its page and its state, with no exception;
- presenter mode fits the screen on Steer at 1920x1080 and at 1280x720;
- the Steer charts' SVG and PNG buttons save 1920x1080 slides; a plotly chart's camera a 1920x1080 PNG.

Screenshots go to test-output/talk/ (git-ignored).
"""

from __future__ import annotations

import struct
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from browser_lab import (
    INSTANT,
    ROOT,
    browser,
    explained_timeout,
    lab_server,
    no_traceback,
    open_page,
    wait_until_idle,
)

from steering.lab import logic
from steering.lab import talk_scripts as talks

SHOTS = ROOT / "test-output" / "talk"
TALK = "paper-in-8-steps"
TITLES = {
    "steer": "Steer the flow",
    "trajectories": "Trajectories through depth",
    "solvers": "Fixed vs adaptive solvers",
    "regimes": "Solver regimes",
    "lens": "Depth lens",
    "dynamics": "Dynamics of the flow",
    "training": "Training: hybrid vs discrete",
    "results": "Results: the paper's experiments on our model",
}
FITS = """() => { const main = document.querySelector('[data-testid="stMain"]');
                  return [document.scrollingElement.scrollHeight, innerHeight,
                          main.scrollHeight, main.clientHeight]; }"""


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("talk-lab")
    with lab_server(root, SHOTS / "streamlit.log") as url:
        yield url, root


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def shows(page, title: str, timeout: float = 300.0):
    """Wait until the page's title is `title` and the app is idle; then no dialog and no exception."""
    page.wait_for_function(
        "(t) => { const h = document.querySelector('h1'); return h && h.innerText.trim() === t; }",
        arg=title,
        timeout=timeout * 1000,
    )
    wait_until_idle(page, timeout=timeout)
    assert page.locator('[role="dialog"]').count() == 0, page.locator('[role="dialog"]').all_inner_texts()
    no_traceback(page)


def test_every_page_opens_by_path_and_by_page_param(lab_url):
    url, root = lab_url
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser(root / "profile-links") as page:
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        # first: the server's first session, which used to answer /steer with "Page not found"
        for path, name in (("/steer", "steer"), ("/regimes", "regimes"), ("/?page=lens", "lens")):
            open_page(page, url + path)
            shows(page, TITLES[name])
            assert urlsplit(page.url).path == f"/{name}"
            # app.py's set_page_config named the tab: app.py routed the run, not Streamlit's pages/ mode
            # (which runs pages/NAME.py alone, its tab titled NAME, its sidebar the file names)
            assert page.title() == "Steering lab", page.title()
            link = page.locator(".st-key-view_link code").text_content()
            assert link.startswith(f"{url}/{name}?") and query(link) == logic.to_query_params(logic.DEFAULT_STATE)
        assert not errors, errors


def wait_for_step(page, k: int, n: int, timeout: float = 300.0):
    page.wait_for_function(
        "(label) => { const bar = document.querySelector('.st-key-talk_bar');"
        "  return bar && bar.innerText.includes(label); }",
        arg=f"{k} / {n}",
        timeout=timeout * 1000,
    )


def wait_for_query(page, want: dict[str, str], timeout: float = 30.0):
    """The address bar's query becomes `want` (the page writes it once its state is known); fails after timeout."""
    try:
        page.wait_for_function(
            "(want) => { const q = Object.fromEntries(new URLSearchParams(location.search));"
            "  return JSON.stringify(q, Object.keys(q).sort()) === JSON.stringify(want, Object.keys(want).sort()); }",
            arg=want,
            timeout=timeout * 1000,
        )
    finally:
        assert query(page.url) == want


def test_page_down_steps_through_the_talk_in_presenter_mode(lab_url):
    url, root = lab_url
    talk = talks.load_talk(TALK)
    n = len(talk.steps)
    with browser(root / "profile-talk", width=1920, height=1080) as page:
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        open_page(page, f"{url}/?talk={TALK}&step=1&presenter=1")
        for k, step in enumerate(talk.steps, start=1):
            with explained_timeout(page, url, f"step {k} ({step.page})"):
                wait_for_step(page, k, n)
                shows(page, TITLES[step.page])
                assert urlsplit(page.url).path == f"/{step.page}"
                wait_for_query(page, {"talk": TALK, "step": str(k), "presenter": "1"})
                assert step.caption in page.locator(".st-key-talk_bar").inner_text()
                # the Trajectories page draws the link after its paths (pages/trajectories.py ends with sync_url); on
                # two cores, in a full fresh-clone run, step 2 once took over playwright's default 30 s to get there;
                # on CI (2026-12-07) a step waited 180 s for it
                link = page.locator(".st-key-view_link code").text_content(timeout=120_000)
            assert query(link) == logic.to_query_params(step.state(presenter=True)), (k, link)
            if k == 1:
                presenter_fits_and_charts_save_slides(page)
            if k == 2:  # plotly charts: the camera saves a 1920x1080 PNG
                options = page.evaluate("() => document.querySelector('.js-plotly-plot')._context.toImageButtonOptions")
                assert options["format"] == "png" and (options["width"], options["height"]) == (1920, 1080)
            page.screenshot(path=str(SHOTS / f"step-{k}-{step.page}.png"))
            if k < n:
                page.keyboard.press("PageDown")
        page.keyboard.press("PageUp")
        wait_for_step(page, n - 1, n)
        shows(page, TITLES[talk.steps[n - 2].page])
        assert not errors, errors


def presenter_fits_and_charts_save_slides(page):
    """On the Steer step: no scrolling at 1920x1080 nor at 1280x720; the charts' PNG and SVG are slides."""
    scroll, inner, main_scroll, main_height = page.evaluate(FITS)
    assert scroll <= inner and main_scroll <= main_height + 1, (scroll, inner, main_scroll, main_height)
    with page.expect_download(timeout=60_000) as download:
        page.locator(f"{INSTANT} button.save-svg").click()
    svg = download.value
    assert svg.suggested_filename == "steering-steer.svg"
    text = open(svg.path(), encoding="utf-8").read()
    assert text.lstrip().startswith("<svg") and 'width="1920"' in text and 'height="1080"' in text
    assert "polyline" in text and "Next token at u" in text  # the map's paths and the bars' title
    with page.expect_download(timeout=60_000) as download:
        page.locator(f"{INSTANT} button.save-png").click()
    png = download.value
    assert png.suggested_filename == "steering-steer.png"
    head = open(png.path(), "rb").read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1920, 1080)

    page.set_viewport_size({"width": 1280, "height": 720})
    deadline = time.perf_counter() + 20
    while True:  # the charts take the height the smaller screen leaves them
        scroll, inner, main_scroll, main_height = page.evaluate(FITS)
        if (scroll <= inner and main_scroll <= main_height + 1) or time.perf_counter() > deadline:
            break
        time.sleep(0.2)
    page.screenshot(path=str(SHOTS / "presenter-1280x720.png"))
    assert scroll <= inner and main_scroll <= main_height + 1, (scroll, inner, main_scroll, main_height)
    page.set_viewport_size({"width": 1920, "height": 1080})
