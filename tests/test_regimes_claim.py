"""The regimes map's rows and paragraph in results.md, read from results.json's shape."""

from steering.evaluation.experiments import without_none
from steering.evaluation.regimes_claim import regimes_map_paragraph, regimes_map_rows


def _section_without_bands():
    # as regimes_map_section returns it for a model with one NFE level at every tolerance (the shipped depth
    # field): band None on every prompt, which results.json drops
    prompt = {
        "prompt": "The movie was",
        "band": None,
        "switch_within_step": None,
        "other_bands": [],
        "why_no_band": "h(u) stays on one side of 1/11 at every t",
        "exceptions": [],
    }
    return without_none(
        {
            "prompts": [prompt, {**prompt, "prompt": "The film was"}],
            "n_prompts": 2,
            "n_exceptions": 0,
            "u_points": 41,
            "tolerances": 25,
            "t_range": [1e-8, 1e-2],
            "alignment_at_band": None,
            "default_reading": "20 NFE at every u.",
            "tolerance_nfe_u0": {"t": [1e-8, 1e-2], "nfe": [56, 20], "reason": ["rejected", "cap-limited"]},
        }
    )


def test_a_map_without_bands_reads_from_results_json():
    rm = _section_without_bands()
    assert "band" not in rm["prompts"][0]  # the shape that broke `experiments` on the depth field
    rows = regimes_map_rows(rm, "14/20 NFE")
    assert rows[0][2] == "no band of two levels on any of 2 probe prompts"
    assert rows[1][2] == "20 NFE at t = 0.01 → 56 at t = 1e-08 (u = 0)"
    text = regimes_map_paragraph(rm, "14/20 NFE")
    assert "no probe prompt takes two levels of the first-step rule: h(u) stays on one side of 1/11" in text
