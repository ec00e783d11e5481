"""The logic behind the lab's pages (steering/lab/logic.py, compute.py) and its figure builders, without Streamlit."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from steering.figures.steer import display_token, steer_figure
from steering.figures.training import ema, global_steps, training_curves_figure
from steering.lab import compute, logic


def test_query_params_round_trip():
    state = logic.LabState(
        prompt="The ending", sentiment=-1.25, style=0.5, solver="dopri5", tolerance=1e-5, presenter=True
    )
    parsed, page, notices = logic.parse_query_params(logic.to_query_params(state))
    assert parsed == state and page is None and notices == []


@pytest.mark.parametrize(
    "params, field, value, notice",
    [
        ({"u": "2.5"}, "sentiment", 2.0, "clamped to 2"),
        ({"u": "-inf"}, "sentiment", -2.0, "clamped to -2"),
        ({"u": "NaN"}, "sentiment", 0.0, "not a number"),
        ({"u": "½"}, "sentiment", 0.0, "not a number"),
        ({"u": "0.333"}, "sentiment", 0.35, None),  # snapped to the slider's 0.05 grid
        ({"style": ["1", "-3"]}, "style", -2.0, "clamped to -2"),  # a repeated key: the last one wins
        ({"tol": "1e-20"}, "tolerance", 1e-8, "clamped to 1e-08"),
        ({"tol": "5"}, "tolerance", 0.1, "clamped to 0.1"),
        ({"steps": "2.5"}, "steps", 2, "not a whole number"),
        ({"steps": "-4"}, "steps", 1, "clamped to 1"),
        ({"solver": "RK4"}, "solver", "rk4", None),
        ({"solver": "leapfrog"}, "solver", "euler", "unknown"),
        ({"presenter": "yes"}, "presenter", True, None),
    ],
)
def test_untrusted_link_values_are_clamped_with_a_notice(params, field, value, notice):
    state, _, notices = logic.parse_query_params(params)
    assert getattr(state, field) == pytest.approx(value) if isinstance(value, float) else getattr(state, field) == value
    if notice is None:
        assert notices == []
    else:
        assert len(notices) == 1 and notice in notices[0]


def test_page_param_and_long_values_in_notices():
    _, page, notices = logic.parse_query_params({"page": "Regimes"})
    assert page == "regimes" and notices == []
    _, page, notices = logic.parse_query_params({"page": "x" * 500})
    assert page is None and len(notices[0]) < 200  # a huge value is quoted shortened


def test_solver_config_from_state():
    assert logic.LabState(solver="rk4", steps=8).solver_config().label() == "rk4 (8 steps)"
    adaptive = logic.LabState(solver="bosh3", tolerance=1e-4).solver_config()
    assert (adaptive.rtol, adaptive.atol) == (1e-4, pytest.approx(1e-5))


def test_clean_prompt():
    assert logic.clean_prompt("  The\tmovie\n was  ") == logic.CleanPrompt("The movie was", ())
    cleaned = logic.clean_prompt("A\x00B\u200bC\x7f")
    assert cleaned.text == "ABC" and "Removed 3" in cleaned.notices[0]
    long = logic.clean_prompt("word " * 200)
    assert len(long.text) <= logic.MAX_PROMPT_CHARS and "first 300" in long.notices[0]
    assert "emoji" in logic.clean_prompt("great 🍿").notices[0] and logic.clean_prompt("great 🍿").text == "great 🍿"
    for empty in ("", "   ", "\x00\x01", None, 42):
        assert logic.clean_prompt(empty).refused
    assert logic.clean_prompt("Ünïcödé café").notices == ()


def test_markdown_escaping_leaves_nothing_active():
    text = "<img src=x onerror=alert(1)> **b** [l](http://x) $x$ :smile: `c` # h"
    escaped = logic.escape_markdown(text)
    assert escaped.replace("\\", "") == text
    import re

    assert not set("<>*[]()$:`#") & set(re.sub(r"\\.", "", escaped))
    assert logic.bold_then_plain(" The movie ", "was *great*") == r" **The movie** was \*great\*"
    assert logic.bold_then_plain("", "x") == "x"


def test_table_csv():
    csv_text = logic.table_csv({"u": [-1.0, 0.5], "nfe": [14, 20]})
    assert csv_text == "u,nfe\n-1.0,14\n0.5,20\n"
    with pytest.raises(ValueError, match="differ in length"):
        logic.table_csv({"a": [1], "b": [1, 2]})


def _log(stage1, stage2=0, alpha=True):
    records = [
        {
            "stage": 1,
            "step": i,
            "loss": 6 - i / 10,
            "grad_norm": 1.0 + (i % 2),
            "ode_grad_norm": 0.1,
            "alpha": 0.1 if alpha else None,
            "exploding": i == 3,
            "vanishing": False,
        }
        for i in range(stage1)
    ]
    records += [
        {
            "stage": 2,
            "step": i,
            "loss": 5.0,
            "grad_norm": 0.5,
            "ode_grad_norm": 0.2,
            "alpha": 0.2 if alpha else None,
            "exploding": False,
            "vanishing": False,
            "val_loss": 4.9,
        }
        for i in range(stage2)
    ]
    return records


def test_stability_rows():
    rows = logic.stability_rows({"hybrid": _log(6, 2), "discrete": _log(6, alpha=False)})
    assert [(r["model"], r["steps"]) for r in rows] == [("hybrid", 6), ("hybrid", 2), ("discrete", 6)]
    first = rows[0]
    assert first["final loss"] == 5.5 and first["exploding steps"] == 1 and first["final α"] == 0.1
    assert first["grad norm"] == "1.500 ± 0.548"
    assert rows[1]["final val loss"] == 4.9 and rows[2]["final α"] is None


def test_training_figure_puts_stage_two_after_stage_one():
    log = _log(6, 3)
    assert global_steps(log).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert ema([1, 1, 1], 5).tolist() == [1, 1, 1] and ema([0, 10], 1).tolist() == [0, 10]
    fig = training_curves_figure({"hybrid": log, "discrete": _log(6, alpha=False)}, smooth=3)
    names = [t.name for t in fig.data]
    assert names.count("hybrid") == 4 and names.count("discrete") == 3  # the discrete model has no α
    assert "hybrid validation" in names
    assert [s.text for s in fig.layout.annotations][-1].strip() == "stage 2: steering"
    assert fig.layout.yaxis2.type == "log"


def test_steer_figure_bars():
    fig = steer_figure([" good", "<b>", "\n"], [0.2, 0.5, 0.3], [np.zeros((2, 2))], [0.0], np.ones((2, 2)), 0.0)
    bar = fig.data[0]
    assert bar.type == "bar" and bar.xaxis is None  # the first subplot
    assert list(bar.y) == ["␣good", "↵", "‹b›"]  # least likely first: plotly draws bottom-up
    assert list(bar.x) == [0.2, 0.3, 0.5] and tuple(fig.layout.xaxis.range) == (0, 0.7)
    assert list(fig.layout.yaxis.ticktext) == ["␣good  20.0%", "↵  30.0%", "‹b›  50.0%"]
    go.Figure(fig.to_dict())  # built unvalidated for speed: it must still pass plotly's validation
    with pytest.raises(ValueError, match="2 probabilities"):
        steer_figure(["a"], [0.1, 0.2], [np.zeros((2, 2))], [0.0], np.ones((2, 2)), 0.0)
    assert display_token("") == "∅"


def test_steer_figure_map():
    ref = [np.array([[0.0, 0.0], [1.0, float(u)]]) for u in (-1, 0, 1)]
    now = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 0.7]])
    fig = steer_figure(
        ["a", "b"],
        [0.6, 0.4],
        ref,
        [-1, 0, 1],
        now,
        0.5,
        explained=[0.6, 0.3],
        bars_title="Next token at u = +0.50",
        map_title="<b>map</b>",
    )
    flow = fig.data[1:]
    assert len(flow) == 5 and all(t.xaxis == "x2" and t.yaxis == "y2" for t in flow)
    assert flow[3].name == "now: u = +0.50" and list(flow[3].x) == [0.0, 1.0, 2.0]
    assert fig.layout.xaxis2.title.text == "PC1 (60% of variance)"
    x_lo, x_hi = fig.layout.xaxis2.range
    assert x_lo < 0 and x_hi > 2
    assert flow[0].line.color == "rgb(192,57,43)" and flow[2].line.color == "rgb(31,111,180)"
    assert [a.text for a in fig.layout.annotations] == ["Next token at u = +0.50", "‹b›map‹/b›"]
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]  # side by side, not overlapping
    validated = go.Figure(fig.to_dict())
    assert validated.layout.template.layout.paper_bgcolor == "white" and validated.layout.uirevision == "steer-map"
    with pytest.raises(ValueError, match="u values"):
        steer_figure(["a"], [1.0], ref, [0, 1], now, 0.0)


def test_regimes_in_chunks_equal_one_sweep(small_hybrid, small_tokenizer):
    from steering.analysis.regimes import nfe_regimes

    grid = np.linspace(-2, 2, 9)
    whole = nfe_regimes(small_hybrid, small_tokenizer, "The movie was", grid, rtol=1e-3, atol=1e-4)
    seen = []
    merged = compute.regimes_in_chunks(
        small_hybrid, small_tokenizer, "The movie was", grid, rtol=1e-3, atol=1e-4, chunks=4, on_progress=seen.append
    )
    assert seen == [0.25, 0.5, 0.75, 1.0]
    for name in whole.nfe:
        assert merged.nfe[name].tolist() == whole.nfe[name].tolist()
    assert merged.switches == whole.switches and merged.segments == whole.segments
    assert merged.switch_u == whole.switch_u and merged.reading == whole.reading
    assert merged.nfe_disagreement == whole.nfe_disagreement and merged.step_disagreement == whole.step_disagreement
    assert np.allclose(merged.target_probability, whole.target_probability)
    assert (merged.crossover_u is None) == (whole.crossover_u is None)
    if whole.crossover_u is not None:
        assert math.isclose(merged.crossover_u, whole.crossover_u)


def test_steer_view_is_deterministic_in_u(small_hybrid, small_tokenizer):
    from steering.analysis.pca import fit_pca_map
    from steering.model.ode import SolverConfig

    pca = fit_pca_map(small_hybrid, small_tokenizer, ["The movie was"], [-1.0, 1.0])
    views = [
        compute.compute_steer_view(
            small_hybrid,
            small_tokenizer,
            pca,
            "The movie was",
            (u, 0.0),
            SolverConfig("euler", steps=4),
            max_new_tokens=12,
        )
        for u in (-2.0, 2.0, -2.0)
    ]
    assert views[0] == views[2]  # same seed: the same text at the same u
    assert views[0].continuation != views[1].continuation
    assert np.allclose(views[0].path[0], views[1].path[0])  # one start point: u acts inside the block
    assert views[0].solve_nfe == 4 and len(views[0].path) == 33 and len(views[0].next_tokens) == 10
    assert abs(sum(views[0].next_probs) - 1) < 1 and views[0].next_probs == sorted(views[0].next_probs, reverse=True)


def test_steer_badges_tone_the_verdict_and_show_the_numbers():
    assert logic.steer_badges(0.9, 0.5, 4) == [
        ("judged positive: P(positive) 90%", "positive"),
        ("VADER +0.50", "neutral"),
        ("NFE of one solve: 4", "neutral"),
    ]
    assert logic.steer_badges(0.05, -0.7, 20)[0] == ("judged negative: P(positive) 5%", "negative")
    assert logic.steer_badges(0.5, 0.0, 4)[0] == ("judged mixed: P(positive) 50%", "neutral")
