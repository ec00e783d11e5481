"""Two models side by side (issue 55): `compare A B` (steering/evaluation/compare.py), the Compare page and its
link, and a model of one's own speaking only its own axes in every command's output."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, UnknownElement
from test_app_pages import APP, TIMEOUT, no_exception
from test_user_model import user_model  # noqa: F401  (the session's model of one's own, trained once)

from steering.cli.main import main
from steering.evaluation import compare
from steering.figures.instant_compare import COMPONENT_NAME, compare_payload
from steering.lab import logic

TINY = compare.CompareSize(texts_per_group=1, prompts=1, probe_prompts=1, n_u=3, curvature_texts=1, repeats=3)
HYBRID_ONLY = ("depth_use_bpb", "block_skip_bpb", "path_curvature", "solver_divergence", "nfe_levels", "nfe_mean")


@pytest.fixture
def two_copies(small_checkpoint, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(small_checkpoint, copy)
    return small_checkpoint, copy


def test_two_copies_of_one_checkpoint_compare_equal_but_for_the_timings(two_copies):
    report = compare.compare_checkpoints(*two_copies, TINY)
    assert report["skipped"] == {}
    expected = {"bits_per_byte", *HYBRID_ONLY, "parameters", "forward_latency_ms"}
    expected |= {f"steer_{axis}_{end}" for axis in ("sentiment", "style") for end in ("plus2", "minus2")}
    assert set(report["a"]) == set(report["b"]) == expected
    for name in expected - set(compare.TIMINGS):
        assert report["a"][name] == report["b"][name], name
        if name in report["ratios"] and report["ratios"][name] is not None:
            assert report["ratios"][name] == 1.0, name
    assert report["a"]["forward_latency_ms"] > 0 and report["ratios"]["forward_latency_ms"] > 0
    assert report["commands"]["depth_use_bpb"] == "python -m steering depth PATH --json"


def test_against_a_discrete_model_every_figure_is_compared_or_skipped_with_its_reason(
    small_checkpoint, small_discrete, small_tokenizer, tmp_path
):
    from steering.training.checkpoint import save_checkpoint

    discrete = save_checkpoint(small_discrete, tmp_path / "discrete", small_tokenizer, dtype=torch.float32)
    report = compare.compare_checkpoints(small_checkpoint, discrete, TINY)
    assert set(report["a"]) == set(report["b"]) == {"bits_per_byte", "parameters", "forward_latency_ms"}
    assert report["ratios"]["parameters"] == report["b"]["parameters"] / report["a"]["parameters"]
    skipped = report["skipped"]
    assert set(skipped) == {
        *HYBRID_ONLY,
        *(f"steer_{a}_{e}" for a in ("sentiment", "style") for e in ("plus2", "minus2")),
    }
    assert all("is discrete" in reason and str(discrete) in reason for reason in skipped.values())
    assert "no ODE block" in skipped["nfe_levels"] and "no control" in skipped["steer_style_minus2"]


def test_compare_on_the_command_line_against_ones_own_model(user_model, small_checkpoint, capsys):  # noqa: F811
    hybrid, _, _ = user_model
    assert main(["compare", str(small_checkpoint), str(hybrid), "--quick", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"checkpoints", "a", "b", "ratios", "skipped", "commands"}
    assert "trained on different text" in report["skipped"]["bits_per_byte"]
    assert "different axes" in report["skipped"]["steer_formality_plus2"]
    assert report["b"]["nfe_mean"] > 0 and report["ratios"]["path_curvature"] is not None
    assert main(["compare", str(small_checkpoint), str(hybrid / "nope")]) == 2
    assert "nope" in capsys.readouterr().err


def test_the_compare_link_round_trips_both_checkpoints_and_the_control():
    state, page, notices = logic.parse_query_params(
        {"a": "assets/flat", "b": "runs/mine/hybrid", "u": "0.5", "style_b": "-1", "page": "compare"}
    )
    assert (state.model_a, state.model_b, state.sentiment, state.style_b, page) == (
        "assets/flat",
        "runs/mine/hybrid",
        0.5,
        -1.0,
        "compare",
    )
    assert logic.parse_query_params(logic.to_query_params(state))[0] == state and not notices
    with pytest.raises(ValueError, match="two sides"):
        compare_payload([{}], ["A"], 0.0, u_min=-2, u_max=2, u_step=0.05, label="u")


def compare_component(at: AppTest) -> dict:
    def walk(block):
        for node in block.children.values():
            if isinstance(node, UnknownElement) and node.type == "bidi_component":
                if node.proto.component_name == COMPONENT_NAME:
                    return json.loads(node.proto.json)
            if isinstance(node, Block):
                found = walk(node)
                if found is not None:
                    return found
        return None

    found = walk(at._tree)
    assert found is not None, "no Compare component on the page"
    return found


def test_the_compare_page_sets_the_control_per_model_where_the_axes_differ(
    user_model,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    hybrid, discrete, cache = user_model
    movie = tmp_path / "runs" / "movie"  # the same weights with a config of the movie-reviews kind (no axes)
    shutil.copytree(hybrid, movie)
    config = json.loads((movie / "config.json").read_text())
    del config["meta"]["axes"], config["meta"]["prompts"]
    (movie / "config.json").write_text(json.dumps(config))
    for key, value in {
        "STEERING_CHECKPOINT": str(hybrid),
        "STEERING_BASELINE": str(discrete),
        "STEERING_CACHE": str(cache),
        "STEERING_CHECKPOINTS": str(tmp_path / "runs"),
        "STEERING_PREFETCH": "0",  # no background work in a test
    }.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"a": str(hybrid), "b": str(movie), "u": "1.5", "style_b": "-1", "page": "compare"})
    at.run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert (at.selectbox(key="w_model_a").value, at.selectbox(key="w_model_b").value) == (str(hybrid), str(movie))
    assert any("different axes" in i.value for i in at.info)
    assert at.slider(key="w_compare_style").label.startswith("A: Topic u₂")
    assert (
        at.slider(key="w_compare_style_b").label.startswith("B: Style u₂")
        and at.slider(key="w_compare_style_b").value == -1.0
    )
    payload = compare_component(at)
    assert payload["current"] == "+1.50" and [s["title"][:2] for s in payload["sides"]] == ["A:", "B:"]
    for side in payload["sides"]:
        view = side["views"]["+1.50"]
        assert view["text"] and view["path"] and view["tokens"]
    assert "formality" in payload["sides"][0]["title"] and "sentiment" in payload["sides"][1]["title"]
    assert [m.label for m in at.metric].count("Block skip (bits/byte)") == 2
    assert dict(at.query_params)["a"] == [str(hybrid)] or at.query_params["a"] == str(hybrid)
    # a link to a checkpoint the lab does not list: the default instead, with a notice
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"a": "/etc", "page": "compare"})
    at.run()
    no_exception(at)
    assert any("a='/etc' in the link is not a checkpoint" in w.value.replace("\\", "") for w in at.warning)


BANNED = re.compile(r"sentiment|movie|film", re.IGNORECASE)


def test_a_model_of_ones_own_speaks_only_its_own_axes_in_every_command(user_model, capsys):  # noqa: F811
    from steering.cli.analyze import KINDS

    hybrid, discrete, _ = user_model
    commands = [
        ["generate", "--checkpoint", str(hybrid), "--max-new-tokens", "3"],
        ["evaluate", "--quick", "--checkpoint", str(hybrid), "--baseline", str(discrete)],
        ["depth", str(hybrid), "--texts", "1", "--prompts", "1", "--probe-prompts", "1"],
        ["sampling", "--checkpoint", str(hybrid), "--prompts", "1"],
        ["compare", str(hybrid), str(discrete), "--quick"],
    ]
    smaller = {
        "middle": ["--n-reviews", "4"],
        "fluency": ["--n-reviews", "2"],
        "contraction": ["--u-values", "0"],
        "convergence": ["--convergence-steps", "4"],
    }
    commands += [
        ["analyze", kind, "--checkpoint", str(hybrid), "--n-u", "3", "--n", "2", *smaller.get(kind, [])]
        for kind in KINDS
    ]
    for command in commands:
        for output in ([], ["--json"]):
            assert main(command + output) == 0, command + output
            out, err = capsys.readouterr()
            found = BANNED.search(out + err)
            assert found is None, (command + output, (out + err)[max(0, found.start() - 80) : found.end() + 80])


def test_the_talk_kit_carries_the_pair_and_exports_the_comparison_slide(
    user_model,  # noqa: F811
    small_checkpoint,
    tmp_path,
    monkeypatch,
    capsys,
):
    from steering.lab import figure_export

    hybrid, _, cache = user_model
    monkeypatch.setenv("STEERING_CACHE", str(cache))
    out = tmp_path / "talk.html"
    args = ["export-talk", "--quiet", "--checkpoint", str(hybrid), "--out", str(out), "--new-tokens", "3"]
    assert main([*args, "--compare-with", str(small_checkpoint)]) == 0
    page = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script id=talk-data type="application/json">(.*?)</script>', page, re.S).group(1))
    pair = data["pair"]
    assert pair["checkpoint"] == str(small_checkpoint) and pair["axes"] == ["sentiment", "style"]
    points = pair["prompts"][0]["points"]
    assert len(points) == 3 and all(len(row) == 41 for row in points) and points[1][20]["text"]
    assert "id=talk-pair" in page and f"--compare-with {small_checkpoint}" in page
    # the comparison slide: both models' bend views and their NFE against u
    assert "compare" not in figure_export.parse_names(None) and "compare" in figure_export.parse_names(None, pair=True)
    inputs = figure_export.Inputs(
        checkpoint=hybrid, baseline=hybrid, results=hybrid, compare_with=small_checkpoint, prompt="The"
    )
    fig = figure_export.build_figures(["compare"], inputs)["compare"]
    nfe = [t for t in fig.data if (t.name or "").startswith("NFE ")]
    assert [t.name.split(" (")[0] for t in nfe] == [f"NFE {hybrid}", f"NFE {small_checkpoint}"]
    assert all(len(t.y) == 21 and min(t.y) > 0 for t in nfe)
    assert sum(1 for t in fig.data if t.xaxis == "x2") >= 5  # B's five paths in its own panel
    with pytest.raises(figure_export.ExportError, match="--compare-with"):
        figure_export.build_figures(
            ["compare"], figure_export.Inputs(checkpoint=hybrid, baseline=hybrid, results=hybrid)
        )


def test_the_flat_field_against_a_depth_varying_one(small_checkpoint, small_depth_hybrid, small_tokenizer, tmp_path):
    from steering.training.checkpoint import save_checkpoint

    depth = save_checkpoint(small_depth_hybrid, tmp_path / "depth", small_tokenizer, dtype=torch.float32)
    report = compare.compare_checkpoints(small_checkpoint, depth, TINY)
    assert report["skipped"] == {}  # same corpus, same axes, both hybrids: everything compares
    assert report["a"]["parameters"] != report["b"]["parameters"]
    assert report["ratios"]["path_curvature"] != 1.0 and report["b"]["path_curvature"] > 0
    text = compare.format_comparison(report)
    assert "B / A" in text and "steer_style_minus2" in text and "skipped" not in text
