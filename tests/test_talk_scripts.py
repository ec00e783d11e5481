"""Talk scripts, view links and the figure export's plain functions (no Streamlit, no browser)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from steering.lab import figure_export, logic
from steering.lab import talk_scripts as talks

TALK = "paper-in-8-steps"


def test_the_shipped_talk_tells_the_paper_in_eight_steps():
    talk = talks.load_talk(TALK)
    assert [s.page for s in talk.steps] == [
        "steer",
        "trajectories",
        "trajectories",
        "solvers",
        "regimes",
        "lens",
        "dynamics",
        "results",
    ]
    assert talk.steps[2].state().dims == 3  # the PCA step: the map in three components
    for step in talk.steps:
        assert step.caption and "\n" not in step.caption
        # a step's parameters are exactly what the lab writes for its state: a step is a link
        assert logic.to_query_params(step.state()) == step.params


def test_every_shipped_talk_loads():
    assert TALK in talks.talk_names()
    for name in talks.talk_names():
        talks.load_talk(name)


@pytest.mark.parametrize(
    "params, index, notice",
    [
        ({"talk": TALK}, 0, None),
        ({"talk": TALK, "step": "3"}, 2, None),
        ({"talk": TALK, "step": "99"}, 7, "clamped to 8"),
        ({"talk": TALK, "step": "0"}, 0, "clamped to 1"),
        ({"talk": TALK, "step": "two"}, 0, "not a number"),
        ({"talk": TALK, "step": "2.5"}, 1, "not a whole number"),
    ],
)
def test_a_link_opens_a_step_and_clamps_a_bad_one(params, index, notice):
    talk, got, notices = talks.talk_from_query(params)
    assert talk is not None and got == index
    assert (notice is None and not notices) or (notice is not None and notice in notices[0])


@pytest.mark.parametrize(
    "name, expected",
    [
        ("nope", "there is no talk 'nope'"),
        ("../../etc/passwd", "is not a talk name"),
        ("a/b", "is not a talk name"),
        ("", None),
    ],
)
def test_a_bad_talk_name_is_a_notice(name, expected):
    talk, index, notices = talks.talk_from_query({"talk": name, "step": "1"})
    assert talk is None and index == 0
    assert (expected is None and not notices) or expected in notices[0]


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"steps": []}', "non-empty list"),
        ('{"steps": [{"page": "nowhere", "caption": "x"}]}', "page 'nowhere' is unknown"),
        ('{"steps": [{"page": "steer", "params": {"u": "abc"}, "caption": "x"}]}', "not a number"),
        ('{"steps": [{"page": "steer", "params": {"colour": "red"}, "caption": "x"}]}', "unknown parameter"),
        ('{"steps": [{"page": "steer", "params": {"u": true}, "caption": "x"}]}', "text or numbers"),
        ('{"steps": [{"page": "steer"}]}', "'caption' must be a line of text"),
        ('{"steps": [{"page": "steer", "caption": "two\\nlines"}]}', "one line"),
        ('{"title": 3, "steps": [{"page": "steer", "caption": "x"}]}', "'title' must be text"),
    ],
)
def test_a_broken_talk_file_says_what_is_wrong(tmp_path, content, expected):
    (tmp_path / "broken.json").write_text(content)
    with pytest.raises(talks.TalkError, match="broken") as err:
        talks.load_talk("broken", tmp_path)
    assert expected in str(err.value)
    talk, _, notices = talks.talk_from_query({"talk": "broken"}, tmp_path)
    assert talk is None and expected in notices[0]


def test_a_step_keeps_presenter_mode_and_a_talk_link_is_short(tmp_path):
    (tmp_path / "t.json").write_text(
        json.dumps(
            {"steps": [{"page": "lens", "params": {"u": "2", "solver": "dopri5", "tol": "1e-05"}, "caption": "Lens."}]}
        )
    )
    talk = talks.load_talk("t", tmp_path)
    state = talk.steps[0].state(presenter=True)
    assert state.presenter and state.solver == "dopri5" and state.tolerance == 1e-5 and state.sentiment == 2.0
    assert talks.talk_query(talk, 0, True) == {"talk": "t", "step": "1", "presenter": "1"}
    assert talks.talk_query(talk, 0, False) == {"talk": "t", "step": "1"}


def test_dims_round_trips_through_the_link():
    state, _, notices = logic.parse_query_params({"dims": "3"})
    assert state.dims == 3 and not notices and logic.to_query_params(state)["dims"] == "3"
    assert "dims" not in logic.to_query_params(logic.DEFAULT_STATE)
    state, _, notices = logic.parse_query_params({"dims": "4"})
    assert state.dims == 2 and "not 2 or 3" in notices[0]


@pytest.mark.parametrize(
    "app_url, page, base",
    [
        ("http://host:8501/regimes", "lens", "http://host:8501/lens"),
        ("http://host:8501/", "steer", "http://host:8501/steer"),
        ("http://host:8501", "results", "http://host:8501/results"),
        ("https://example.org/lab/steer", "solvers", "https://example.org/lab/solvers"),  # behind a path prefix
        (None, "dynamics", "/dynamics"),
    ],
)
def test_the_view_link_reproduces_page_and_state(app_url, page, base):
    state = logic.LabState(prompt="A film & more", sentiment=-1.25, solver="rk4", steps=8, presenter=True)
    link = logic.view_link(app_url, state, page)
    parts = urlsplit(link)
    assert link.startswith(base + "?")
    parsed, _, notices = logic.parse_query_params({k: v[-1] for k, v in parse_qs(parts.query).items()})
    assert parsed == state and not notices


def test_find_browser_prefers_browser_path(tmp_path):
    exe = tmp_path / "chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert figure_export.find_browser({"BROWSER_PATH": str(exe)}, which=lambda n: None) == str(exe)
    assert figure_export.find_browser({}, which=lambda n: f"/bin/{n}" if n == "chromium" else None) == "/bin/chromium"
    with pytest.raises(figure_export.ExportError, match="not an executable"):
        figure_export.find_browser({"BROWSER_PATH": str(tmp_path / "none")}, which=lambda n: None)
    with pytest.raises(figure_export.ExportError, match="apt-get install chromium"):
        figure_export.find_browser({}, which=lambda n: None)


def test_figure_names():
    assert figure_export.parse_names(None) == [n for n in figure_export.FIGURES if n != "compare"]  # needs a pair
    assert figure_export.parse_names("all", pair=True) == list(figure_export.FIGURES)
    assert figure_export.parse_names("regimes, steer,regimes") == ["regimes", "steer"]
    with pytest.raises(figure_export.ExportError, match="unknown figure"):
        figure_export.parse_names("steer,pie")


def test_the_page_script_survives_streamlits_sanitiser():
    """st.html's DOMPurify drops a <script> that opens the HTML, and one whose text holds '<' before a
    letter or '/': then PageUp/PageDown and the SVG button would silently do nothing."""
    import re

    from lab_ui import widgets

    html = widgets.BROWSER_SCRIPT
    assert not html.lstrip().startswith("<script")
    body = html[html.index("<script>") + len("<script>") : html.rindex("</script>")]
    assert not re.search(r"<[/\w!]", body)
