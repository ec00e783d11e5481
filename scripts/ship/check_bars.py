"""Issue 53's bars on what measure_candidate.sh saved: one table (figure / value / bar / met), exit 1 if one is missed.

    python scripts/ship/check_bars.py OUTDIR [--after-three-tries]

Reads only OUTDIR's files (JSON with the json module, the independent checks' printed lines, train_log.jsonl), so
a folder measured once can be judged again. A figure whose file or key is absent counts as missed: an incomplete
measurement never passes. Rows with met "-" are reported, not bars. The figures of sampled text (judges, style,
perplexity ratio, valid words, trigrams) are judged on their mean over evaluate.json and the two other seeds' files
(SEED_RUNS), the range beside it. Style steering's bar is 0.9 on both sides, 0.85
after three stage-2 tries that missed 0.9 (issue 53): both verdicts are printed, --after-three-tries makes the
second one count.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ASSETS_BUDGET_BYTES = 80 * 1000 * 1000  # as tests/test_shipped_model.py counts it
ONE_FRAME_MS = 1000 / 60
LANDED = 1.0 + 1e-6  # the solves' τ are float32: τ = 1 is 1.0 within that
# the generations' figures move with the seed (the flat hybrid's perplexity ratio: 1.43 / 1.42 / 1.56 over these),
# so they are judged on their mean over `evaluate` at three seeds, the range shown. SAMPLED is
# steering.evaluation.evaluate.GENERATION_FIGURES, written out: this script reads files only (tests/test_ship_bars.py)
SEED_RUNS = ("evaluate", "evaluate_seed2234", "evaluate_seed3234")
SAMPLED = (
    "steer_pos_clf", "steer_neg_clf", "steer_pos_vader", "steer_neg_vader", "style_rt_acc", "style_imdb_acc",
    "valid_word_rate", "repeated_trigram_rate", "ppl_ratio_steered",
)  # fmt: skip


class Missing(Exception):
    """A file or figure the bar needs is not in the folder."""


@dataclass
class Row:
    figure: str
    value: str
    bar: str
    met: bool | None  # None: reported beside the bars, not one of them
    note: str = ""


def shown(x: float) -> str:
    return f"{x:.5f}" if abs(x) >= 1 else f"{x:.4g}"  # bits/byte one decimal past the bars (1.6034 is a bar)


class Folder:
    def __init__(self, path: Path):
        self.path = path

    def json(self, name: str):
        path = self.path / f"{name}.json"
        if not path.is_file():
            raise Missing(path.name)
        return json.loads(path.read_text())

    def number(self, name: str, pattern: str) -> tuple[float, ...]:
        """The numbers a check printed, found by the sentence around them."""
        path = self.path / f"{name}.txt"
        if not path.is_file():
            raise Missing(path.name)
        found = re.search(pattern, path.read_text())
        if found is None:
            raise Missing(f"{path.name}: no line matching {pattern!r}")
        return tuple(float(g) for g in found.groups())

    def log(self) -> list[dict]:
        path = self.path / "train_log.jsonl"
        if not path.is_file():
            raise Missing(path.name)
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judged(figure: str, bar: str, compute, counted: bool = True) -> Row:
    """compute() -> (value shown, met); a missing file or key is a missed bar (or, for a report, says so)."""
    try:
        value, met = compute()
    except (Missing, KeyError, TypeError) as err:
        return Row(figure, f"missing ({err})", bar, False if counted else None)
    return Row(figure, value, bar, met if counted else None)


def evaluate_rows(f: Folder, after_three_tries: bool) -> list[Row]:
    def e(key):
        if key in SAMPLED:  # the mean over the seeds
            values = [f.json(name)[key] for name in SEED_RUNS]
            return sum(values) / len(values)
        return f.json("evaluate")[key]

    def value(key):
        if key not in SAMPLED:
            return shown(e(key))
        values = [f.json(name)[key] for name in SEED_RUNS]
        return f"{shown(e(key))} (mean of {len(values)} seeds, {shown(min(values))}-{shown(max(values))})"

    def at_least(key, floor):
        return judged(key, f">= {floor:g}", lambda: (value(key), e(key) >= floor))

    def at_most(key, ceiling):
        return judged(key, f"<= {ceiling:g}", lambda: (value(key), e(key) <= ceiling))

    rows = [
        judged("steer_u", "== 2 (steering judged at u = ±2)", lambda: (shown(e("steer_u")), e("steer_u") == 2.0)),
        at_least("depth_use_bpb", 0.05),
        judged(
            "block_skip_bpb",
            ">= 0.8 x baseline_middle_bpb",
            lambda: (
                f"{shown(e('block_skip_bpb'))} = {e('block_skip_bpb') / e('baseline_middle_bpb'):.3f} x "
                f"{shown(e('baseline_middle_bpb'))}",
                e("block_skip_bpb") >= 0.8 * e("baseline_middle_bpb"),
            ),
        ),
        at_least("path_curvature", 0.01),
        at_most("solver_divergence", 0.005),
        at_most("bits_per_byte_hybrid", 1.6034),
        at_most("bits_per_byte_hybrid_imdb", 1.5737),
        judged(
            "bits/byte hybrid / discrete",
            "goal <= 1 (discrete 1.5818)",
            lambda: (
                f"{shown(e('bits_per_byte_hybrid'))} / {shown(e('bits_per_byte_discrete'))} = "
                f"{e('bits_per_byte_hybrid') / e('bits_per_byte_discrete'):.4f}",
                None,
            ),
            counted=False,
        ),
        judged(
            "val_loss_own_control",
            "< val_loss_u0",
            lambda: (
                f"{shown(e('val_loss_own_control'))} vs {shown(e('val_loss_u0'))}",
                e("val_loss_own_control") < e("val_loss_u0"),
            ),
        ),
        at_least("probe_good_pos", 0.98),
        at_least("probe_bad_neg", 0.98),
        at_least("steer_pos_clf", 0.95),
        at_least("steer_neg_clf", 0.95),
        at_least("steer_pos_vader", 0.85),
        at_least("steer_neg_vader", 0.85),
    ]
    for key in ("style_rt_acc", "style_imdb_acc"):
        row = judged(key, ">= 0.9 (0.85 after three tries)", lambda key=key: (value(key), e(key) >= 0.9))
        if not row.value.startswith("missing"):
            fallback = e(key) >= 0.85
            row.note = f">= 0.85: {'yes' if fallback else 'NO'}"
            row.met = fallback if after_three_tries else row.met
        rows.append(row)
    rows += [
        at_most("ppl_ratio_steered", 1.5),
        at_least("valid_word_rate", 0.985),
        at_most("repeated_trigram_rate", 0.02),
    ]
    return rows


def log_rows(f: Folder) -> list[Row]:
    def stability():
        records = f.log()
        stages = {r.get("stage") for r in records}
        bad = [sum(bool(r.get(k)) for r in records) for k in ("exploding", "vanishing")]
        steps = ", ".join(f"stage {s}: {sum(r.get('stage') == s for r in records)}" for s in sorted(stages))
        return f"{bad[0]} / {bad[1]} over {len(records)} steps ({steps})", bad == [0, 0] and stages >= {1, 2}

    return [judged("exploding / vanishing steps (train_log.jsonl)", "0 / 0, both stages logged", stability)]


def curvature_rows(f: Folder) -> list[Row]:
    def c(key):
        return f.json("curvature")[key]

    def share():
        bend, full = max(c("orthogonal_share_bend")), max(c("orthogonal_share"))
        return f"{shown(bend)} = {bend / full:.3f} x {shown(full)}", bend >= 0.5 * full

    def arc():
        bend, full = max(c("arc_to_chord_bend")) - 1, max(c("arc_to_chord")) - 1
        return f"{shown(bend)} = {bend / full:.3f} x {shown(full)}", bend >= 0.3 * full

    return [
        judged("largest orthogonal_share_bend", ">= 0.5 x full space's", share),
        judged("largest arc_to_chord_bend - 1", ">= 0.3 x full space's", arc),
    ]


def regimes_rows(f: Folder) -> list[Row]:
    def r(key):
        return f.json("regimes")[key]

    def levels():
        counts = [len(set(p["nfe"])) for p in r("prompts")]
        nfe = sorted({n for p in r("prompts") for n in p["nfe"]})
        return f"{sum(c >= 2 for c in counts)} of {len(counts)} prompts; NFE {'/'.join(map(str, nfe))}", None

    return [
        judged(
            "regimes: furthest τ evaluated (max_tau)",
            "<= 1 (every solve lands on τ = 1)",
            lambda: (f"{r('max_tau'):.7f}", r("max_tau") <= LANDED),
        ),
        judged("regimes: two NFE levels or more", "no bar", levels, counted=False),
    ]


def bench_rows(f: Folder) -> list[Row]:
    def b(key):
        return f.json("bench")[key]

    def app_point() -> tuple[str, dict]:
        """The bench's point at the solver the lab opens the checkpoint with: the trained one, or Euler 4."""
        default = f.json("facts")["app_default_solver"]
        if b("latency_solver") == default:
            return default, {k: b(k) for k in ("latency_ratio", "flop_ratio")}
        if b("euler4") and b("euler4")["solver"] == default:
            return default, b("euler4")
        raise Missing(f"no bench point at the app's default solver {default}")

    def parity():
        solver, point = app_point()
        over = point["latency_ratio"] - point["flop_ratio"]
        return (
            f"{point['latency_ratio']:.3f} vs {point['flop_ratio']:.3f} ({solver}; {over:+.3f})",
            over <= 0.05,
        )

    def solvers():
        cheap = b("euler4")
        trained = f"{b('latency_solver')}: latency {b('latency_ratio'):.3f}x, FLOPs {b('flop_ratio'):.3f}x"
        if not cheap:
            return trained + " (trained with Euler 4: no second point)", None
        return (
            f"{trained}, bits/byte {cheap.get('bits_per_byte_trained', float('nan')):.4f}, divergence "
            f"{cheap['solver_divergence_trained']:.2e}; {cheap['solver']}: latency {cheap['latency_ratio']:.3f}x, "
            f"FLOPs {cheap['flop_ratio']:.3f}x, bits/byte {cheap.get('bits_per_byte', float('nan')):.4f}, "
            f"divergence {cheap['solver_divergence']:.2e}",
            None,
        )

    return [
        judged("bench: latency ratio at the app's default solver", "<= FLOP ratio + 0.05", parity),
        judged(
            "bench: decode / its floor", "<= 2", lambda: (f"{b('decode_over_floor'):.2f}x", b("decode_over_floor") <= 2)
        ),
        judged("bench: both solvers", "reported", solvers, counted=False),
    ]


def app_rows(f: Folder) -> list[Row]:
    def a(key):
        return f.json("bench_app")[key]

    return [
        judged(
            "bench_app: cold start",
            "< 10 s",
            lambda: (f"{a('cold_start_to_first_render_s'):.2f} s", a("cold_start_to_first_render_s") < 10),
        ),
        judged(
            "bench_app: range after a prompt change",
            "<= 3 s",
            lambda: (f"{a('range_after_prompt_change_s'):.2f} s", a("range_after_prompt_change_s") <= 3),
        ),
        judged(
            "bench_app: slider step (median)",
            f"<= one frame ({ONE_FRAME_MS:.1f} ms)",
            lambda: (
                f"{a('slider_to_updated_plot_median_ms'):.1f} ms",
                a("slider_to_updated_plot_median_ms") <= ONE_FRAME_MS,
            ),
        ),
    ]


def size_rows(f: Folder) -> list[Row]:
    def facts(key):
        return f.json("facts")[key]

    return [
        judged(
            "assets/ once shipped",
            "<= 80 MB",
            lambda: (
                f"{facts('assets_bytes_shipped') / 1e6:.1f} MB",
                facts("assets_bytes_shipped") <= ASSETS_BUDGET_BYTES,
            ),
        ),
        judged(
            "tokenizer.json",
            "byte-identical to assets/discrete's",
            lambda: (
                "identical" if facts("tokenizer_same_as_discrete") else "differs",
                facts("tokenizer_same_as_discrete"),
            ),
        ),
        judged(
            "weights", "reported (assets/ ship fp16)", lambda: (", ".join(facts("weight_dtypes")), None), counted=False
        ),
    ]


def independent_rows(f: Folder) -> list[Row]:
    """scripts/checks/*.py, outside the project's scoring and solvers: each against the project's own figure."""

    def bits():
        every, imdb = f.number("check_bits_per_byte", r"bits/byte all ([\d.]+), imdb ([\d.]+)")
        e = f.json("evaluate")
        gap = max(abs(every - e["bits_per_byte_hybrid"]), abs(imdb - e["bits_per_byte_hybrid_imdb"]))
        return f"{every:.4f} / imdb {imdb:.4f} (largest gap {gap:.1e})", gap <= 2e-3

    def divergence():
        if (f.path / "check_solver_divergence.txt").is_file() and "nothing to check" in (
            f.path / "check_solver_divergence.txt"
        ).read_text():
            return "n/a (not a depth field trained with RK4)", True
        mean, _ = f.number("check_solver_divergence", r"vs DOP853 mean ([\d.]+) max ([\d.]+)")
        return f"{mean:.5f}", mean <= 0.005

    def scipy_steps():
        multi, total, tau = f.number(
            "check_adaptive_steps",
            r"(\d+) of (\d+) prompts take two levels or more; field evaluated up to τ = ([\d.]+)",
        )
        return f"{int(multi)} of {int(total)} prompts take two levels; up to τ = {tau:.6f}", None

    def human():
        (accuracy,) = f.number("check_human_or_model", r"human-vs-model accuracy ([\d.]+)")
        return f"{accuracy:.3f} (0.5: indistinguishable)", None

    return [
        judged("check: bits/byte (scripts/checks)", "within 0.002 of evaluate's", bits),
        judged("check: RK4 vs DOP853 (scripts/checks)", "<= 0.005", divergence),
        judged("check: scipy RK45 levels (scripts/checks)", "no bar", scipy_steps, counted=False),
        judged("check: human or model (scripts/checks)", "no bar", human, counted=False),
    ]


def all_rows(folder: Path, after_three_tries: bool = False) -> list[Row]:
    f = Folder(folder)
    return (
        evaluate_rows(f, after_three_tries)
        + log_rows(f)
        + curvature_rows(f)
        + regimes_rows(f)
        + bench_rows(f)
        + app_rows(f)
        + size_rows(f)
        + independent_rows(f)
    )


def table(rows: list[Row]) -> str:
    lines = ["| figure | value | bar | met |", "|---|---|---|---|"]
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "**NO**")
        lines.append(f"| {r.figure} | {r.value} | {r.bar} | {met}{f' ({r.note})' if r.note else ''} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--after-three-tries", action="store_true", help="style's bar is 0.85 (issue 53, Build 1)")
    args = parser.parse_args(argv)
    if not args.outdir.is_dir():
        print(f"no folder {args.outdir}", file=sys.stderr)
        return 2
    rows = all_rows(args.outdir, args.after_three_tries)
    print(table(rows))
    bars = [r for r in rows if r.met is not None]
    missed = [r.figure for r in bars if not r.met]
    print(f"\n{len(bars) - len(missed)} of {len(bars)} bars met" + (f"; missed: {'; '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
