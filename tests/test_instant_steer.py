"""The Steer page's instant view: its payload is plain data that holds every computed position."""

import json

import numpy as np
import pytest

from steering.figures.instant_steer import CSS, HTML, JS, instant_payload, instant_view, position_key


def _view(u: float, rng) -> dict:
    return instant_view(
        "The movie was",
        f" fine at {u:+.2f}",
        [("judged positive: P(positive) 80%", "positive"), ("NFE of one solve: 4", "neutral")],
        [" bad", " good", "\n"],
        [0.2, 0.7, 0.1],
        rng.normal(size=(9, 3)) + u,
    )


def test_position_keys_are_signed_two_decimals_and_unique_on_the_slider_grid():
    grid = [round(-2 + k * 0.05, 2) for k in range(81)]
    keys = [position_key(u) for u in grid]
    assert keys[0] == "-2.00" and keys[40] == "+0.00" and keys[-1] == "+2.00"
    assert position_key(-0.0) == "+0.00" and position_key(0.1 + 0.2) == "+0.30"
    assert len(set(keys)) == 81


def test_a_view_sorts_tokens_by_probability_and_keeps_two_pca_coordinates():
    view = _view(0.5, np.random.default_rng(0))
    assert view["tokens"] == ["␣good", "␣bad", "↵"] and view["probs"] == [0.7, 0.2, 0.1]
    assert np.asarray(view["path"]).shape == (9, 2)
    assert view["prompt"] == "The movie was" and view["text"] == " fine at +0.50"
    assert view["badges"] == [["judged positive: P(positive) 80%", "#1f6fb4"], ["NFE of one solve: 4", "inherit"]]


def test_the_payload_holds_every_position_and_a_map_extent_that_contains_every_path():
    rng = np.random.default_rng(1)
    us = [round(-1 + k * 0.05, 2) for k in range(41)]
    views = {u: _view(u, rng) for u in us}
    reference = [rng.normal(size=(9, 2)) * 3 + u for u in (-2.0, 0.0, 2.0)]
    payload = instant_payload(
        views, reference, [-2.0, 0.0, 2.0], 0.25, u_min=-2, u_max=2, u_step=0.05, explained=[0.61, 0.2], pending=40
    )
    json.dumps(payload)  # the component gets it as JSON
    assert set(payload["views"]) == {position_key(u) for u in us}
    assert payload["current"] == "+0.25" and payload["pending"] == 40
    x0, x1, y0, y1 = payload["extent"]
    points = np.concatenate(
        [np.asarray(v["path"]) for v in payload["views"].values()]
        + [np.asarray(r["path"]) for r in payload["reference"]]
    )
    assert (points[:, 0] > x0).all() and (points[:, 0] < x1).all()
    assert (points[:, 1] > y0).all() and (points[:, 1] < y1).all()
    assert payload["axes"] == ["PC1 (61% of variance)", "PC2 (20% of variance)"]
    # the reference colours run red (negative) to blue (positive)
    assert (
        payload["reference"][0]["color"] == "rgb(192,57,43)" and payload["reference"][-1]["color"] == "rgb(31,111,180)"
    )


def test_the_component_source_reports_the_sentiment_and_never_loads_anything():
    assert 'setStateValue("sentiment"' in JS and 'setTriggerValue("poll"' in JS
    assert "innerHTML" not in JS  # model and user text go in as text, never as markup
    assert "export default function" in JS
    for source in (HTML, CSS, JS):
        assert "http://" not in source.replace('"http://www.w3.org/2000/svg"', "")
        assert "https://" not in source and "import " not in source


@pytest.mark.parametrize("bad", [np.zeros((4, 1)), np.zeros(4)])
def test_a_path_without_two_coordinates_is_refused(bad):
    with pytest.raises((ValueError, IndexError)):
        instant_view("p", "t", [], ["a"], [1.0], bad)
