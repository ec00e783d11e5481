"""The offline talk demo (steering/lab/talk.py, steering/figures/talk.py, `python -m steering export-talk`).

On a small random checkpoint (seconds): the grid holds every one of the 41 × 3 controls, the HTML
is self-contained (plotly.js inlined, nothing loaded from anywhere), its data survives the trip
through a <script> element, it stays under the size bound, and the CLI writes it.
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import plotly
import pytest
import torch

from steering.figures import talk as talk_figures
from steering.figures import talk_page
from steering.lab import compute, logic, talk

NEW_TOKENS = 6
REGIME_POINTS = 5
HOSTILE = "</script><script>alert(1)</script> & <b>bold</b>"


def _small_checkpoint(folder, tokenizer):
    """A random small hybrid with a strong field (as tests/lab_checkpoints.py makes its hybrid)."""
    from lab_checkpoints import SIZE

    from steering.model.transformer import HybridODETransformer, ModelConfig
    from steering.training.checkpoint import save_checkpoint

    torch.manual_seed(0)
    model = HybridODETransformer(ModelConfig(arch="hybrid", **{**SIZE, "vocab_size": tokenizer.get_vocab_size()}))
    with torch.no_grad():
        torch.nn.init.normal_(model.field.fc_out.weight, std=0.08)
        model.field.alpha.fill_(0.6)
    return save_checkpoint(model.eval(), folder, tokenizer, dtype=torch.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory, small_tokenizer):
    """(model, tok, pca map, TalkData, html) for two prompts, one of them hostile to HTML."""
    from steering.analysis.pca import fit_pca_map
    from steering.training.checkpoint import load_checkpoint

    root = tmp_path_factory.mktemp("talk")
    ckpt = _small_checkpoint(root / "ckpt", small_tokenizer)
    model, tok, config = load_checkpoint(ckpt)
    pca_map = fit_pca_map(model, tok, key="test")
    data = talk.build_talk(
        model,
        tok,
        pca_map,
        ["The movie was", HOSTILE],
        seed=3,
        max_new_tokens=NEW_TOKENS,
        checkpoint=ckpt,
        config=config,
        regime_points=REGIME_POINTS,
    )
    html = talk_page.talk_html(data)
    return model, tok, pca_map, data, html


def _embedded(html: str) -> dict:
    found = re.search(r'<script id=talk-data type="application/json">(.*?)</script>', html, re.S)
    assert found, "no data element"
    return json.loads(found.group(1))


def test_the_grid_is_41_sentiments_by_3_styles():
    assert len(talk.SENTIMENTS) == 41 and talk.SENTIMENTS[0] == -2.0 and talk.SENTIMENTS[-1] == 2.0
    assert talk.SENTIMENTS[20] == 0.0 and np.allclose(np.diff(talk.SENTIMENTS), 0.1)
    assert talk.STYLES == (-1.0, 0.0, 1.0)
    controls = talk.grid_controls()
    assert len(controls) == len(set(controls)) == 123


def test_every_grid_point_is_present_and_complete(built):
    model, tok, pca_map, data, _ = built
    assert [p.prompt for p in data.prompts] == ["The movie was", HOSTILE]
    for prompt in data.prompts:
        assert len(prompt.points) == 3 and all(len(row) == 41 for row in prompt.points)
        seen = {(p.sentiment, p.style) for row in prompt.points for p in row}
        assert seen == set(talk.grid_controls())
        assert len(prompt.tau) == talk.N_TAU and prompt.tau[0] == 0.0 and prompt.tau[-1] == pytest.approx(1.0)
        for row, style in zip(prompt.points, talk.STYLES):
            for point, sentiment in zip(row, talk.SENTIMENTS):
                assert (point.sentiment, point.style) == (sentiment, style)
                assert isinstance(point.continuation, str) and point.continuation
                assert 0.0 <= point.score <= 1.0 and -1.0 <= point.vader_compound <= 1.0
                assert point.verdict == logic.sentiment_label(point.score)
                assert len(point.next_tokens) == len(point.next_probs) == talk.TOP_K
                assert np.asarray(point.path).shape == (talk.N_TAU, 3)
                assert point.solve_nfe == 4
        # the regimes and the comparisons, on their coarser grids
        assert len(prompt.regimes.u) == REGIME_POINTS and set(prompt.regimes.nfe) == {"dopri5", "adaptive_heun"}
        assert [len(r) for r in prompt.comparisons] == [len(talk.COMPARE_SENTIMENTS)] * 3
        assert all(c.b.nfe > c.a.nfe == 4 for row in prompt.comparisons for c in row)
    # moving u changes the text (same seed everywhere, so only u can)
    texts = {p.continuation for p in data.prompts[0].points[1]}
    assert len(texts) > 1


def test_a_grid_point_is_the_steer_pages_view(built):
    """The grid is the Steer page's computation: a point equals compute_steer_view for that control alone."""
    model, tok, pca_map, data, _ = built
    point = data.prompts[0].point(1.0, -1.0)
    alone = compute.compute_steer_view(
        model, tok, pca_map, "The movie was", (1.0, -1.0), model.training_solver, seed=3, max_new_tokens=NEW_TOKENS
    )
    assert point.next_tokens == alone.next_tokens
    assert point.next_probs == pytest.approx(alone.next_probs, rel=1e-4, abs=1e-6)
    assert np.asarray(point.path) == pytest.approx(np.asarray(alone.path), rel=1e-4, abs=1e-5)
    judged = compute.judge_text(data.prompts[0].prompt_shown + point.continuation)  # as the Steer page judges
    assert point.score == pytest.approx(judged.score, abs=1e-6)
    assert point.vader_compound == pytest.approx(judged.vader_compound, abs=1e-6)


def test_the_page_data_holds_every_point(built):
    _, _, _, data, html = built
    page = _embedded(html)
    assert page["sentiments"] == list(talk.SENTIMENTS) and page["styles"] == list(talk.STYLES)
    assert [p["prompt"] for p in page["prompts"]] == ["The movie was", HOSTILE]
    for prompt, source in zip(page["prompts"], data.prompts):
        assert len(prompt["points"]) == 3 and all(len(row) == 41 for row in prompt["points"])
        for row, source_row in zip(prompt["points"], source.points):
            for point, p in zip(row, source_row):
                assert set(point) >= {"u", "text", "score", "vader", "verdict", "nfe", "path", "steer"}
                assert point["text"] == p.continuation and point["u"] == [p.sentiment, p.style]
                assert point["score"] == pytest.approx(p.score, rel=1e-4)
                assert set(point["steer"]) == {"bars", "now", "ends", "layout"}
                assert len(point["steer"]["bars"]["x"]) == talk.TOP_K
                assert len(point["path"]) == talk.N_TAU
        assert len(prompt["traj"]) == 3 and all(f["highlight"] == 41 for f in prompt["traj"])
        assert {t.get("name") for t in prompt["regimes"]["data"]} >= {"NFE dopri5", "NFE adaptive_heun"}
        assert [len(r) for r in prompt["compare"]] == [len(talk.COMPARE_SENTIMENTS)] * 3
    # every array is plain numbers (the script slices them), not plotly's base64 form
    assert '"bdata"' not in re.search(r"<script id=talk-data[^>]*>(.*?)</script>", html, re.S).group(1)


def test_the_file_loads_nothing_from_anywhere(built):
    html = built[4]
    bundle = plotly.offline.get_plotlyjs()
    assert html.count(bundle) == 1, "plotly.js must be inlined exactly once"
    ours = html.replace(bundle, "")
    for needle in ("http://", "https://", "//cdn", "url(", "@import", "mathjax"):
        assert needle not in ours.lower(), needle
    for pattern in (
        r"<script[^>]*\bsrc\s*=",
        r"<link\b",
        r"<iframe\b",
        r"<img\b",
        r"<object\b",
        r"<embed\b",
        r"<base\b",
        r"<audio\b",
        r"<video\b",
        r"<source\b",
    ):
        assert not re.search(pattern, html, re.I), pattern
    assert re.search(r"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'", html)
    assert "connect-src 'none'" in html


def test_model_text_cannot_break_out_of_the_page(built):
    html = built[4]
    assert "</script><script>alert" not in html and "<b>bold</b>" not in html
    assert _embedded(html)["prompts"][1]["prompt"] == HOSTILE
    assert html.count("</script>") == 3  # the data, plotly.js, the page's script


def test_the_footer_names_the_model_and_the_command(built):
    model, _, _, data, html = built
    assert data.model["d_model"] == model.config.d_model and data.model["parameters"] == model.num_parameters()
    assert f"d_model {model.config.d_model}" in html
    assert "python -m steering export-talk" in html and "--seed 3" in html and f"--new-tokens {NEW_TOKENS}" in html
    assert "Build offline demo" in html  # made in Python, not by the CLI: the footer says so
    assert "No stored <code>evaluate</code> figures" in html  # a random checkpoint has none


def test_the_file_is_within_the_size_bound(built):
    assert len(built[4].encode()) <= talk.MAX_BYTES


def test_compact_rounds_and_decodes_plotly_arrays():
    raw = np.array([1.234567891, -0.000123456789, 3.0])
    encoded = {"dtype": "f8", "bdata": base64.b64encode(raw.tobytes()).decode()}
    assert talk_figures.compact({"x": encoded, "y": float("nan"), "n": 3, "b": True}) == {
        "x": [1.2346, -0.00012346, 3.0],
        "y": None,
        "n": 3,
        "b": True,
    }
    shaped = {"dtype": "i4", "bdata": base64.b64encode(np.arange(6, dtype="i4").tobytes()).decode(), "shape": "2, 3"}
    assert talk_figures.compact(shaped) == [[0, 1, 2], [3, 4, 5]]
    assert talk_figures.script_json({"t": "</script>&"}) == '{"t":"\\u003c/script\\u003e\\u0026"}'


def test_prompts_are_cleaned_and_bounded():
    assert talk.clean_prompts(["  The   movie\nwas ", "The movie was", "The end"]) == ["The movie was", "The end"]
    assert talk.clean_prompts("One") == ["One"]
    with pytest.raises(ValueError, match="empty"):
        talk.clean_prompts(["\u200b  "])
    with pytest.raises(ValueError, match="at most"):
        talk.clean_prompts([f"prompt {k}" for k in range(talk.MAX_PROMPTS + 1)])


def test_the_stored_evaluation_must_be_this_checkpoints(tmp_path, small_hybrid):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    folder = tmp_path / "results"
    folder.mkdir()

    def write(checkpoint, parameters):
        (folder / "results.json").write_text(
            json.dumps(
                {
                    "meta": {"checkpoint": str(checkpoint), "quick": False},
                    "stability": {"parameters_hybrid": parameters},
                    "evaluate": {"val_loss_hybrid": 5.0, "steer_pos_clf": 0.9},
                }
            )
        )

    write(ckpt, small_hybrid.num_parameters())
    found = talk.stored_evaluation(ckpt, small_hybrid, [folder])
    assert found["values"]["steer_pos_clf"] == 0.9 and found["note"] is None
    write(tmp_path / "elsewhere", small_hybrid.num_parameters())
    assert talk.stored_evaluation(ckpt, small_hybrid, [folder])["values"] is None
    write(ckpt, small_hybrid.num_parameters() + 1)  # the model was replaced since: stale
    stale = talk.stored_evaluation(ckpt, small_hybrid, [folder])
    assert stale["values"] is None and "rerun" in stale["note"]
    assert "experiments" in talk.stored_evaluation(ckpt, small_hybrid, [tmp_path / "none"])["note"]


def test_a_discrete_model_is_refused(small_discrete, small_tokenizer):
    with pytest.raises(ValueError, match="hybrid"):
        talk.build_talk(small_discrete, small_tokenizer, None, ["The movie was"])


def test_the_cli_writes_the_file(tmp_path, small_tokenizer, monkeypatch, capsys):
    from steering.cli.main import main

    ckpt = _small_checkpoint(tmp_path / "ckpt", small_tokenizer)
    monkeypatch.setenv("STEERING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STEERING_RESULTS", str(tmp_path / "no-results"))
    out = tmp_path / "out" / "talk.html"
    assert (
        main(
            [
                "export-talk",
                "--out",
                str(out),
                "--checkpoint",
                str(ckpt),
                "--prompt",
                "The acting",
                "The end",
                "--seed",
                "7",
                "--new-tokens",
                "4",
                "--quiet",
            ]
        )
        == 0
    )
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text()
    assert 0 < out.stat().st_size <= talk.MAX_BYTES
    assert [p["prompt"] for p in _embedded(html)["prompts"]] == ["The acting", "The end"]
    command = re.search(r"<code id=talk-command>(.*?)</code>", html).group(1)
    assert command.startswith("python -m steering export-talk --out ")
    assert "--prompt &#x27;The acting&#x27; --prompt &#x27;The end&#x27;" in command
    assert "--seed 7 --new-tokens 4" in command
    assert "Build offline demo" not in html  # made by the command, which the footer quotes
    assert list((tmp_path / "cache" / "pca").glob("pca-*.npz"))  # the lab's PCA map cache, so the lab reuses it


def test_the_page_opens_at_the_control_asked_for(tmp_path, small_tokenizer, monkeypatch, capsys):
    from steering.cli.main import main

    ckpt = _small_checkpoint(tmp_path / "ckpt", small_tokenizer)
    monkeypatch.setenv("STEERING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STEERING_RESULTS", str(tmp_path / "no-results"))
    out = tmp_path / "talk.html"
    base = ["export-talk", "--out", str(out), "--checkpoint", str(ckpt), "--new-tokens", "2", "--quiet"]
    assert main([*base, "--u", "sentiment=-1.5", "--u", "style=1"]) == 0
    html = out.read_text()
    assert re.search(r'id=talk-sentiment [^>]*value="-1.5"', html)
    assert re.search(r'id="talk-style-pos" value="1" checked', html)
    command = re.search(r"<code id=talk-command>(.*?)</code>", html).group(1)
    assert "--u sentiment=-1.5 --u style=1" in command  # the footer's command makes the same file
    # off the grid (style is -1, 0 or 1 there) or not an axis: exit 2 before any computing, no file
    for bad, why in ((["--u", "style=0.5"], "one of -1, 0, 1"), (["--u", "mood=1"], "no axis 'mood'")):
        out.unlink(missing_ok=True)
        assert main([*base, *bad]) == 2
        assert why in capsys.readouterr().err and not out.exists()


def test_the_cli_reports_a_bad_checkpoint(tmp_path, capsys):
    from steering.cli.main import main

    assert main(["export-talk", "--out", str(tmp_path / "t.html"), "--checkpoint", str(tmp_path / "none")]) == 2
    assert "checkpoint folder not found" in capsys.readouterr().err
    assert not (tmp_path / "t.html").exists()


def test_the_steer_page_builds_the_offline_demo(tmp_path, small_tokenizer, monkeypatch):
    """The Steer page's "Build offline demo" button computes the file on click and offers it for download."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    ckpt = _small_checkpoint(tmp_path / "ckpt", small_tokenizer)
    for key, value in {
        "STEERING_CHECKPOINT": str(ckpt),
        "STEERING_CACHE": str(tmp_path / "cache"),
        "STEERING_RESULTS": str(tmp_path / "no-results"),
        "STEERING_PREFETCH": "0",
    }.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=300)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.get("download_button"), "the file is built on click, not on every page load"
    at.button(key="w_build_talk").click().run()
    assert not at.exception, [e.value for e in at.exception]
    downloads = at.get("download_button")
    assert len(downloads) == 1 and "offline demo" in downloads[0].proto.label
