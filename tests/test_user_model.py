"""Steer any attribute, end to end: a small labelled file with two attributes that are not sentiment
(formality, topic), `train --preset tiny` on it (both archs), then `evaluate --json`, `export-talk` and every
page of the lab on that checkpoint, with the file's axis names and end labels on the sliders."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app_pages import APP, TIMEOUT, chart, instant, no_exception
from user_files import labelled_rows, write_csv

from steering.cli.main import main
from steering.training.checkpoint import ASSETS

AXES = ["--axis", "formality=register:casual,formal", "--axis", "topic=topic"]
SHORT = ["--preset", "tiny", "--steps", "30", "--stage2-steps", "10", "--eval-every", "10", "--no-progress"]
SMALL = ["--d-model", "32", "--field-hidden", "64", "--block-size", "48"]  # the lab tests' size: pages render fast
FORMALITY_LABEL = "Formality u₁  (− casual … + formal)"
TOPIC_LABEL = "Topic u₂  (− cooking … + sports)"


@pytest.fixture(scope="session")
def user_model(tmp_path_factory):
    """(hybrid, discrete, cache) trained on a labelled CSV through the command line."""
    root = tmp_path_factory.mktemp("user_model")
    data = write_csv(root / "formality_topic.csv", labelled_rows(320))
    models = root / "models"
    hybrid, discrete = models / "hybrid", models / "discrete"
    common = ["--data", str(data), "--text-column", "text", *AXES, *SHORT, *SMALL]
    # the topic axis's probe words by hand; formality's come from its judge
    assert main(["train", *common, "--probe-words", "topic=soup,goal", "--out", str(hybrid)]) == 0
    assert (
        main(
            [
                "train",
                *common,
                "--arch",
                "discrete",
                "--out",
                str(discrete),
                "--tokenizer",
                str(hybrid / "tokenizer.json"),
            ]
        )
        == 0
    )
    return hybrid, discrete, root / "cache"


def test_the_checkpoint_records_the_axes_their_judges_and_prompts(user_model):
    hybrid, _, _ = user_model
    meta = json.loads((hybrid / "config.json").read_text())["meta"]
    assert [(a["name"], a["negative"], a["positive"]) for a in meta["axes"]] == [
        ("formality", "casual", "formal"),
        ("topic", "cooking", "sports"),
    ]
    # the probe's targets: the words the training split ties most to each end
    assert set(meta["axes"][1]["probe_words"]["positive"]) <= {
        "match",
        "coach",
        "striker",
        "goal",
        "league",
        "table",
        "extra",
        "time",
        "late",
    }
    assert set(meta["axes"][0]["probe_words"]["negative"]) <= {"lol", "honestly", "yeah", "so", "omg", "kinda"}
    assert meta["train"]["data"].endswith("formality_topic.csv") and meta["train"]["text_column"] == "text"
    heldout = {json.loads(line)["text"] for line in (hybrid / "heldout.jsonl").read_text().splitlines()}
    assert meta["prompts"] and all(any(t.startswith(p) for t in heldout) for p in meta["prompts"])
    for name in ("axis0.json", "axis0.safetensors", "axis1.json", "axis1.safetensors", "training_words.json"):
        assert (hybrid / "judges" / name).is_file()
    # the tokenizer was trained on the file: its words are whole tokens
    vocab = json.loads((hybrid / "tokenizer.json").read_text())["model"]["vocab"]
    assert "Ġstriker" in vocab and "Ġbasil" in vocab


def test_evaluate_json_judges_each_axis(user_model, capsys):
    hybrid, discrete, _ = user_model
    assert main(["evaluate", "--quick", "--json", "--checkpoint", str(hybrid), "--baseline", str(discrete)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in report["axes"]] == ["formality", "topic"]
    for axis in report["axes"]:
        assert axis["judge_heldout_acc"] >= 0.9  # the attributes are plain in the words: the judges learn them
        assert 0.0 <= axis["steer_positive_acc"] <= 1.0 and 0.0 <= axis["steer_negative_acc"] <= 1.0
    assert report["skipped"] == [] and "baseline_middle_bpb" in report
    topic = report["axes"][1]["probe"]  # each axis has its own probe, on its own words, steered on its own entry
    assert (topic["positive_word"], topic["negative_word"]) == (" goal", " soup")
    assert 0.0 <= topic["positive_share_at_plus"] <= 1.0
    words = json.loads((hybrid / "config.json").read_text())["meta"]["axes"][0]["probe_words"]
    probe = report["axes"][0]["probe"]  # the first axis's probe words, steered at ±u
    assert (probe["positive_word"], probe["negative_word"]) == (" " + words["positive"][0], " " + words["negative"][0])
    assert 0.0 <= probe["positive_share_at_plus"] <= 1.0 and 0.0 <= probe["negative_share_at_minus"] <= 1.0
    assert report["val_loss_hybrid"] < 6.3  # below a uniform guess over the 512 tokens (ln 512 = 6.24 + slack)
    assert 0.0 < report["valid_word_rate"] <= 1.0


def test_probe_words_by_hand_are_checked_before_training(user_model, tmp_path, capsys):
    hybrid, _, _ = user_model
    axes = json.loads((hybrid / "config.json").read_text())["meta"]["axes"]
    assert axes[1]["probe_words"] == {"negative": ["soup"], "positive": ["goal"]}
    assert axes[0]["probe_words"]["positive"] and axes[0]["probe_words"]["negative"]  # the judge's words
    data = write_csv(tmp_path / "rows.csv", labelled_rows(240))
    common = ["train", "--data", str(data), "--text-column", "text", *AXES, *SHORT, *SMALL]
    for bad, why in ((["--probe-words", "nope=a,b"], "no axis 'nope'"), (["--probe-words", "topic=soup"], "two words")):
        assert main([*common, *bad, "--out", str(tmp_path / "never")]) == 2
        assert why in capsys.readouterr().err
        assert not (tmp_path / "never").exists()


def test_evaluate_without_a_baseline_judges_the_model_alone(user_model, capsys):
    hybrid, discrete, _ = user_model
    assert main(["evaluate", "--quick", "--json", "--checkpoint", str(hybrid)]) == 0  # the shipped one cannot match
    alone = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in alone["axes"]] == ["formality", "topic"]
    for key in ("depth_use_bpb", "block_skip_bpb", "path_curvature", "valid_word_rate", "ppl_ratio_steered"):
        assert isinstance(alone[key], float), key
    assert "val_loss_discrete" not in alone and "bits_per_byte_discrete" not in alone
    assert alone["skipped"] and all("no baseline" in line for line in alone["skipped"])
    assert {line.split(":")[0] for line in alone["skipped"]} >= {"val_loss_discrete", "bits_per_byte_discrete"}
    assert main(["evaluate", "--quick", "--checkpoint", str(hybrid)]) == 0
    assert "skipped val_loss_discrete: no baseline" in capsys.readouterr().out
    # an explicit baseline on another tokenizer stays an error
    assert main(["evaluate", "--quick", "--checkpoint", str(hybrid), "--baseline", str(ASSETS / "discrete")]) == 2
    assert "different tokenizers" in capsys.readouterr().err


def test_generate_and_analyze_take_the_checkpoints_own_axis_names(user_model, capsys):
    hybrid, _, _ = user_model
    base = ["--checkpoint", str(hybrid), "--prompt", "The", "--max-new-tokens", "3"]
    assert main(["generate", *base, "--u", "topic=1", "--json"]) == 0
    (sample,) = json.loads(capsys.readouterr().out)
    assert sample["control"] == {"formality": 0.0, "topic": 1.0}
    assert "sentiment" not in sample and "style" not in sample  # only the checkpoint's own axes
    assert main(["generate", *base, "--u", "formality=-1.5"]) == 0
    assert "(formality -1.5, topic +0, NFE" in capsys.readouterr().out
    # an unknown axis, a value out of range, or the shipped model's shortcut: exit 2 naming the axes, no output
    for bad in (["--u", "nope=1"], ["--u", "topic=4"], ["--sentiment", "1"], ["--u", "topic"]):
        assert main(["generate", *base, *bad]) == 2, bad
        out, err = capsys.readouterr()
        assert out == "" and "formality in [-3, 3], topic in [-3, 3]" in err, (bad, err)
    assert main(["analyze", "trajectory", "--checkpoint", str(hybrid), "--u", "formality=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["control"] == {"formality": 1.0, "topic": 0.0}
    assert main(["analyze", "trajectory", "--checkpoint", str(hybrid), "--axis", "sentiment"]) == 2
    assert "no axis 'sentiment'" in capsys.readouterr().err


def test_export_talk_names_the_axes(user_model, tmp_path, capsys, monkeypatch):
    hybrid, _, cache = user_model
    monkeypatch.setenv("STEERING_CACHE", str(cache))
    out = tmp_path / "talk.html"
    assert main(["export-talk", "--quiet", "--checkpoint", str(hybrid), "--out", str(out), "--new-tokens", "4"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Formality u₁" in page and "Topic u₂" in page
    assert "casual" in page and "cooking" in page and "sports" in page
    assert "Sentiment u₁" not in page and "critic blurb" not in page
    # what a reader sees (outside scripts, styles and tags, and the figures' titles in the payload) has no movie word
    visible = re.sub(r"<script.*?</script>|<style.*?</style>|<[^>]+>", " ", page, flags=re.S).lower()
    titles = " ".join(re.findall(r'"title":\s*\{"text":\s*"([^"]*)"', page)).lower()
    assert "formality" in visible and "topic" in titles
    for word in ("sentiment", "movie", "film", "review"):
        assert word not in visible and word not in titles, word
    prompts = json.loads((hybrid / "config.json").read_text())["meta"]["prompts"]
    assert json.dumps(prompts[0])[1:-1] in page  # the default prompt: the model's first held-out opening


@pytest.fixture
def user_lab(user_model, monkeypatch):
    hybrid, discrete, cache = user_model
    for key, value in {
        "STEERING_CHECKPOINT": str(hybrid),
        "STEERING_BASELINE": str(discrete),
        "STEERING_CACHE": str(cache),
        "STEERING_RESULTS": str(cache / "no-results"),
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("STEERING_CHECKPOINTS", raising=False)
    return hybrid


def run(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if page:
        at.switch_page(page).run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    return at


def test_the_steer_page_shows_the_axes_and_the_models_own_prompts(user_lab):
    at = run()
    payload = instant(at)
    assert payload["label"] == FORMALITY_LABEL
    assert at.slider(key="w_style").label == TOPIC_LABEL
    prompts = json.loads((user_lab / "config.json").read_text())["meta"]["prompts"]
    assert at.text_area(key="w_prompt").value == prompts[0]
    badges = [text for text, _ in payload["views"][payload["current"]]["badges"]]
    assert badges[0].startswith("judged ") and "P(formal)" in badges[0]
    assert any("casual" in c.value or "formal" in c.value for c in at.caption)


@pytest.mark.parametrize(
    "page",
    [
        "pages/trajectories.py",
        "pages/solvers.py",
        "pages/regimes.py",
        "pages/lens.py",
        "pages/dynamics.py",
        "pages/training.py",
        "pages/results.py",
    ],
)
def test_every_page_renders_on_the_users_checkpoint(user_lab, page):
    at = run(page)
    assert at.title
    labels = {s.key: s.label for s in at.slider}
    if page == "pages/trajectories.py":
        assert labels["w_sentiment"] == FORMALITY_LABEL and labels["w_style"] == TOPIC_LABEL
        assert chart(at, "paths")["data"]
    if page == "pages/regimes.py":
        meta = json.loads((user_lab / "config.json").read_text())["meta"]
        words = meta["axes"][0]["probe_words"]
        assert at.text_input(key="w_target_pos").value == " " + words["positive"][0]
        assert at.text_input(key="w_target_neg").value == " " + words["negative"][0]
        assert labels["w_sentiment"] == "Formality u₁ for this sweep"
        assert chart(at, "regimes")["data"]
    if page == "pages/results.py":  # none made yet: the page gives the command for this checkpoint
        assert any(f"--checkpoint {user_lab}" in i.value for i in at.info), [i.value for i in at.info]


def test_experiments_on_the_users_checkpoint_run_what_fits_and_name_the_rest(user_lab, tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    shutil.copytree(user_lab, mine)
    assert main(["experiments", "--quick", "--checkpoint", str(mine)]) == 0
    results = json.loads((mine / "results" / "results.json").read_text())  # beside the checkpoint, by default
    assert {k["section"] for k in results["skipped"]} == {"activation_steering", "efficiency"}
    assert "activation_steering" not in results and "baseline" not in results["meta"]
    subject = results["meta"]["subject"]
    words = json.loads((mine / "config.json").read_text())["meta"]["axes"][0]["probe_words"]
    assert subject["axis"] == "formality"
    assert subject["targets"] == [" " + words["positive"][0], " " + words["negative"][0]]
    assert [a["name"] for a in results["steering"]["axes"]] == ["formality", "topic"]
    assert set(results["solver_probing"]["alignment"]) == {"suggested", "heldout"}
    markdown = (mine / "results" / "results.md").read_text()
    assert "formality (casual / formal)" in markdown and "topic (cooking / sports)" in markdown
    assert "The movie was" not in markdown  # the shipped subject's prompt
    # the figure export and the talk kit look for results where experiments wrote them, and say what was skipped
    from steering.evaluation.results_table import results_folder
    from steering.lab import figure_export, talk

    assert results_folder(mine) == mine / "results" and mine / "results" in talk.results_folders(mine)
    inputs = figure_export.Inputs(checkpoint=mine, baseline=mine, results=results_folder(mine))
    with pytest.raises(figure_export.ExportError, match="no activation-steering comparison: the rival"):
        figure_export.FIGURES["activation-steering"](None, inputs)
    # the Results page shows the open checkpoint's results, and says what was skipped
    monkeypatch.setenv("STEERING_CHECKPOINT", str(mine))
    monkeypatch.delenv("STEERING_RESULTS")
    at = run("pages/results.py")
    table = at.dataframe[0].value
    assert "formality" in " ".join(table["paper figure"]) and not at.info
    assert any("Skipped: against activation steering" in m.value for m in at.markdown)


def test_a_checkpoint_is_listed_once_however_its_path_is_written(monkeypatch):
    """STEERING_CHECKPOINT=assets/flat (relative) is the shipped flat field, not a second checkpoint beside it:
    listed twice, its two entries shared one label and the sidebar's picker switched between them by itself."""
    from lab_ui import models

    monkeypatch.chdir(ASSETS.parent)
    monkeypatch.delenv("STEERING_CHECKPOINTS", raising=False)
    monkeypatch.setenv("STEERING_CHECKPOINT", "assets/flat")
    assert models.checkpoint_choices() == [Path("assets/flat")]
    monkeypatch.setenv("STEERING_CHECKPOINT", "assets/hybrid")
    assert models.checkpoint_choices() == [Path("assets/hybrid"), ASSETS / "flat"]


def test_a_checkpoint_switch_and_a_prompt_edit_in_one_rerun_keep_the_page(user_lab, monkeypatch, tmp_path):
    """The switch resets the sliders and the prompt to the new model's; the prompt's own callback in the same
    rerun must not look for the widget state the switch dropped (it raised KeyError: 'w_prompt')."""
    movie = tmp_path / "movie"
    shutil.copytree(user_lab, movie)
    monkeypatch.setenv("STEERING_CHECKPOINT", str(movie))
    monkeypatch.setenv("STEERING_CHECKPOINTS", str(user_lab.parent))
    at = run("pages/trajectories.py")
    at.text_area(key="w_prompt").set_value("An edit the switch overrides")
    at.selectbox(key="w_checkpoint").set_value(str(user_lab))
    at.run()
    no_exception(at)
    prompts = json.loads((user_lab / "config.json").read_text())["meta"]["prompts"]
    assert at.text_area(key="w_prompt").value == prompts[0]


def test_the_sidebar_switches_between_checkpoints_found_under_a_folder(user_lab, monkeypatch, tmp_path):
    # a checkpoint of the movie-reviews kind: the same weights with a config that records no axes
    movie = tmp_path / "movie"
    shutil.copytree(user_lab, movie)
    config = json.loads((movie / "config.json").read_text())
    del config["meta"]["axes"], config["meta"]["prompts"]
    (movie / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("STEERING_CHECKPOINT", str(movie))
    monkeypatch.setenv("STEERING_CHECKPOINTS", str(user_lab.parent))  # holds the hybrid and the discrete
    at = run("pages/trajectories.py")
    picker = at.selectbox(key="w_checkpoint")
    # the discrete one is not offered; the shipped flat field (assets/flat) is, beside the one the app started with
    assert picker.options == ["movie", "flat", "hybrid"] and picker.value == str(movie)
    assert at.slider(key="w_sentiment").label == "Sentiment u₁  (− negative … + positive)"
    picker.set_value(str(user_lab)).run()
    no_exception(at)
    assert at.slider(key="w_sentiment").label == FORMALITY_LABEL
    assert at.slider(key="w_style").label == TOPIC_LABEL
    prompts = json.loads((user_lab / "config.json").read_text())["meta"]["prompts"]
    assert at.text_area(key="w_prompt").value == prompts[0]  # the new model's own opening
