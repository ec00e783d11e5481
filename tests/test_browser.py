"""The lab in a real browser: `streamlit run app.py` on a free port, driven through Debian's chromium.

Moves the sentiment slider and checks that the generated text and the map's path changed,
that the URL followed, and that no page shows a traceback (the other pages are opened in a browser by the talk test).
Screenshots go to test-output/browser/ (git-ignored).
"""

from __future__ import annotations

import pytest
from browser_lab import (
    ROOT,
    browser,
    full_page_screenshot,
    lab_server,
    map_signature,
    move_sentiment,
    no_traceback,
    open_page,
    shows_chart_under,
    steer_text,
    wait_for_steer_page,
    wait_until_idle,
)

SHOTS = ROOT / "test-output" / "browser"
# the pages the talk test (test_talk_script_browser.py) does not open in a browser, and Regimes, whose background map
# and the charts under it are checked here only
PAGES = ("regimes", "training")


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-lab")
    with lab_server(root, SHOTS / "streamlit.log") as url:
        yield url, root


def test_slider_steers_text_and_plot_in_the_browser(lab_url):
    url, root = lab_url
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser(root / "profile") as page:
        open_page(page, f"{url}/?u=-2")
        wait_for_steer_page(page)
        wait_until_idle(page)
        no_traceback(page)
        text_before, map_before = steer_text(page), map_signature(page)
        assert text_before.startswith("The movie was") and map_before[0] == "-2.00"
        page.screenshot(path=str(SHOTS / "steer_u-2.png"), full_page=True)

        move_sentiment(page, "End")  # to u = +2
        text_after, map_after = steer_text(page), map_signature(page)
        assert map_after[0] == "+2.00" and map_after[1] != map_before[1]
        assert text_after != text_before
        page.wait_for_function("() => new URLSearchParams(location.search).get('u') === '2'", timeout=60_000)
        wait_until_idle(page)
        no_traceback(page)
        page.screenshot(path=str(SHOTS / "steer.png"), full_page=True)

        for name in PAGES:
            open_page(page, f"{url}/{name}?u=0.5")
            page.wait_for_selector("h1", timeout=300_000)
            wait_until_idle(page, timeout=300)
            no_traceback(page)
            if name == "regimes":  # the map fills in the background; the step trace and heatmaps sit below
                page.wait_for_selector(".st-key-regimes_map", timeout=300_000)
                wait_until_idle(page, timeout=300)
                for heading in ("The regimes map", "Why this many steps?", "Speed, turn and stretching"):
                    assert shows_chart_under(page, heading), heading
            full_page_screenshot(page, SHOTS / f"{name}.png")

        open_page(page, f"{url}/?u=1.5&presenter=1")
        wait_for_steer_page(page)
        wait_until_idle(page)
        page.screenshot(path=str(SHOTS / "steer_presenter.png"), full_page=True)

        open_page(page, f"{url}/?u=banana&solver=%3Cscript%3E")
        wait_for_steer_page(page)
        wait_until_idle(page)
        warnings = page.locator('[data-testid="stAlert"]').all_inner_texts()
        assert any("not a number" in w for w in warnings) and any("unknown" in w for w in warnings)
        no_traceback(page)
        page.screenshot(path=str(SHOTS / "steer_bad_link.png"), full_page=True)
    assert all((SHOTS / f"{name}.png").stat().st_size > 10_000 for name in PAGES)
