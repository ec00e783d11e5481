"""One command line: python -m steering {train, generate, ...} --help"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..model.ode import SOLVERS, SolverConfig, SolverStepLimitError
from ..training.checkpoint import DEFAULT_CHECKPOINT, CheckpointError

COMMANDS: dict = {}


def command(name: str, help: str):
    def register(fn):
        COMMANDS[name] = (fn, help)
        return fn

    return register


def add_solver_args(p: argparse.ArgumentParser):
    p.add_argument(
        "--solver", default=None, choices=SOLVERS, help="ODE solver for the continuous block (default: as trained)"
    )
    p.add_argument("--steps", type=int, default=None, help="steps of a fixed-step solver (default: as trained, else 4)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of an adaptive solver")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance of an adaptive solver")
    p.add_argument("--max-steps", type=int, default=2000, help="cap on adaptive steps (error beyond it)")


def solver_from_args(args, trained: SolverConfig) -> SolverConfig:
    """The solver the flags name; what they leave out is the checkpoint's training solver (`trained`)."""
    method = args.solver or trained.method
    steps = args.steps if args.steps is not None else (trained.steps if method == trained.method else 4)
    return SolverConfig(method, steps=steps, rtol=args.rtol, atol=args.atol, max_steps=args.max_steps)


@command("train", "train the hybrid or the discrete baseline (works under torchrun)")
def _train(args):
    from ..training.train import make_config, train, train_config_fields

    overrides = {k: getattr(args, k) for k in train_config_fields() if hasattr(args, k)}
    overrides["out"] = args.out or f"runs/{args.arch}"
    for key in ("axes", "probe_words"):
        if overrides.get(key) is not None:
            overrides[key] = tuple(overrides[key])
    if args.data or args.axes or args.text_column or args.probe_words:
        # the file is read and checked before anything is written (a bad one: one line, exit 2)
        from ..training.train import _user_corpus

        corpus = _user_corpus(make_config(args.preset, **overrides))
        if corpus is not None and corpus.notes():
            print(f"note: {corpus.notes()}", file=sys.stderr)
    out = train(make_config(args.preset, **overrides), progress=not args.no_progress)
    print(f"wrote {out}")


def _train_args(p):
    from ..training.config import TrainConfig

    demo = TrainConfig()
    p.formatter_class = lambda prog: argparse.HelpFormatter(prog, max_help_position=38)
    p.usage = "%(prog)s [--arch ARCH] [--preset NAME] [option ...]"
    p.description = (
        "Stage 1: language modelling with u (both archs, the same batches). Stage 2 (hybrid only): "
        "the ODE block and the blocks after it learn to steer. An option left out takes the "
        "preset's value; (N) is the demo preset's. The recipes: scripts/train_*.sh."
    )

    def option(group, name, metavar, text, typ=float, **kw):
        default = getattr(demo, name, None)
        shown = (
            ""
            if default in (None, "") or isinstance(default, bool)
            else f" ({default:g})"
            if isinstance(default, float)
            else f" ({default})"
        )
        group.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=typ, default=None, metavar=metavar, help=text + shown, **kw
        )

    run = p._optionals  # -h lives in argparse's own group: run control goes beside it
    run.title = "run control"
    run.add_argument("--out", default=None, metavar="DIR", help="output folder (runs/ARCH)")
    run.add_argument("--device", default=None, help="auto (CUDA if present), cpu, cuda")
    run.add_argument("--resume", action="store_true", default=None, help="continue from OUT/resume")
    run.add_argument(
        "--bf16",
        dest="bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bf16 autocast forward (fp32 weights)",
    )
    option(run, "seed", "N", "initialisation and batches", int)
    option(run, "eval_every", "N", "held-out loss every N steps", int)
    option(run, "save_every_s", "S", "resumable state at least every S s")
    option(run, "dist_timeout_s", "S", "torchrun: wait S s for a peer")
    run.add_argument("--no-progress", action="store_true", help="progress lines (ETA) in place of a bar")

    model = p.add_argument_group("model")
    model.add_argument("--arch", default="hybrid", choices=["hybrid", "discrete"], help="discrete: the baseline")
    model.add_argument("--preset", default="demo", choices=["tiny", "demo"], help="tiny: a toy model for tests")
    option(model, "vocab_size", "N", "BPE size, without --tokenizer", int)
    option(model, "block_size", "N", "context length in tokens", int)
    option(model, "d_model", "N", "width", int)
    option(model, "n_heads", "N", "attention heads per block", int)
    option(model, "n_pre", "N", "blocks before the middle", int)
    option(model, "n_mid", "N", "blocks the middle stands for", int)
    option(model, "n_post", "N", "blocks after the middle", int)
    option(model, "field_heads", "N", "> 0: the field attends (hybrid)", int)
    option(model, "field_hidden", "N", "the field's MLP width", int)
    option(model, "field_norm", None, "the field's input norm", str, choices=["layer", "entry"])
    option(model, "control_embed_dim", "N", "width of the control embedding e(u)", int)
    option(model, "field_basis", "K", "> 0: the field's weights vary with τ (K Legendre terms)", int)
    option(model, "solver", None, "the middle's training solver", str, choices=["euler", "midpoint", "rk4"])
    option(model, "solver_steps", "N", "its steps", int)
    option(model, "alpha_init", "A", "α, the field's output scale")
    model.add_argument(
        "--freeze-alpha",
        dest="train_alpha",
        action="store_false",
        default=None,
        help="keep α at --alpha-init in both stages",
    )

    data = p.add_argument_group("data")
    data.add_argument("--tokenizer", default=None, metavar="PATH", help="reuse this tokenizer.json")
    data.add_argument(
        "--data", default=None, metavar="FILE", help="your labelled .csv/.jsonl/.parquet (default: movie reviews)"
    )
    data.add_argument("--text-column", dest="text_column", default=None, metavar="COL", help="with --data: the texts")
    data.add_argument(
        "--axis",
        dest="axes",
        action="append",
        default=None,
        metavar="NAME=COL[:neg,pos]",
        help="with --data: a control axis (once or twice)",
    )
    data.add_argument(
        "--probe-words",
        dest="probe_words",
        action="append",
        default=None,
        metavar="NAME=NEG,POS",
        help="with --data: the words whose odds probe an axis (default: those its judge ties most to each end)",
    )
    option(data, "max_reviews", "N", "0: every training review", int)
    option(data, "tokens_per_batch", "N", "stage 1's batch", int)
    option(data, "rt_fraction", "F", "share of Rotten Tomatoes batches")

    stage1 = p.add_argument_group("stage 1")
    option(stage1, "steps", "N", "optimiser steps", int)
    option(stage1, "lr", "LR", "peak lr, cosine down to 0.1x")
    option(stage1, "warmup", "N", "warm-up steps (stage 2: a quarter)", int)

    stage2 = p.add_argument_group("stage 2 (hybrid)")
    option(stage2, "stage2_steps", "N", "optimiser steps (0: none)", int)
    option(stage2, "stage2_lr", "LR", "peak lr")
    option(stage2, "stage2_tokens_per_batch", "N", "batch, run once per u copy", int)
    stage2.add_argument(
        "--stage2-beyond-only",
        dest="stage2_beyond_only",
        action="store_true",
        default=None,
        help="train only new directions for |u| > 1; u = 0 and ±1 keep stage 1's fit",
    )
    option(stage2, "beyond_positive_lr_scale", "S", "with it: the u > 1 directions' rate, a share of --stage2-lr")

    penalty = p.add_argument_group("penalties and contrast")
    option(penalty, "roughness_weight", "W", "α·F changing along the path")
    penalty.add_argument(
        "--roughness-relative-to",
        dest="roughness_relative_to",
        choices=["state", "field"],
        default=None,
        metavar="REF",
        help="state (demo): over |H(0)|²; field: over |F|²",
    )
    option(penalty, "stage2_roughness_weight", "W", "stage 2's (default: stage 1's)")
    option(
        penalty,
        "stage2_roughness_relative_to",
        "REF",
        "stage 2's (default: stage 1's)",
        str,
        choices=["state", "field"],
    )
    option(penalty, "overlap_weight", "W", "the field reading its own writes")
    option(penalty, "solver_error_weight", "W", "RK4's embedded error estimate (depth-varying field)")
    option(penalty, "solver_error_tolerance", "E", "the relative error it allows at no cost")
    option(penalty, "solver_error_start", "N", "stage 1's step where it starts (ramped over --warmup)", int)
    option(penalty, "solver_error_ramp", "N", "steps its weight rises over, as a square (0: linear over --warmup)", int)
    option(penalty, "solver_error_reference_steps", "N", "> 0: measure it against RK4 in N steps, not estimated", int)
    option(penalty, "contrast_weight", "W", "sentiment contrast (and style's)")
    option(penalty, "style_contrast_weight", "W", "style's own (default: sentiment's)")
    option(penalty, "contrast_positive_side", "S", "gradient scale at sentiment +1")
    option(penalty, "contrast_u", "U", "|u| of the contrast's copies")


def add_control_args(p):
    """`--u NAME=VALUE` by the checkpoint's axis names, and the shipped model's two shortcuts."""
    p.add_argument(
        "--u",
        action="append",
        metavar="NAME=VALUE",
        help="the control on one of the checkpoint's axes (-3..3), repeatable; an axis left out is 0",
    )
    p.add_argument("--sentiment", type=float, default=None, help="the shipped model's --u sentiment=VALUE")
    p.add_argument("--style", type=float, default=None, help="the shipped model's --u style=VALUE")


@command("generate", "sample steered continuations of a prompt")
def _generate(args):
    from ..api import load
    from ..model.controls import control_from_args

    m = load(args.checkpoint)  # the API's generate: one way from the notebook and from here
    control = control_from_args(m.config, args)
    sampling = ("temperature", "top_k", "top_p", "repetition_penalty", "no_repeat_ngram")
    results = m.generate(
        args.prompt,
        control.as_dict(),
        n=args.n,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        solver=solver_from_args(args, m.model.training_solver),
        **{k: getattr(args, k) for k in sampling if getattr(args, k) is not None},
    )
    if args.json:
        print(json.dumps([{**r.to_dict(), "control": control.as_dict()} for r in results], indent=2))
        return
    if results and results[0].notice:
        print(f"note: {results[0].notice}", file=sys.stderr)
    for i, r in enumerate(results):
        print(f"--- sample {i + 1} ({control.describe()}, NFE {r.nfe})")
        print(r.text)


def _generate_args(p):
    p.add_argument("--prompt", default="", help="text to continue (empty: start from scratch)")
    add_control_args(p)
    p.add_argument("--n", type=int, default=1, help="number of samples")
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument(
        "--temperature", type=float, default=None, help="default: the sampler's (steering/inference/generate.py)"
    )
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--repetition-penalty", type=float, default=None)
    p.add_argument("--no-repeat-ngram", type=int, default=None, help="forbid repeating any n-gram of tokens")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    p.add_argument("--json", action="store_true", help="print a JSON list")
    add_solver_args(p)


@command("bench", "efficiency ratios, hybrid vs discrete: latency, FLOPs, KV cache, training memory, NFE sweep")
def _bench(args):
    from ..evaluation.bench import format_report, run_bench
    from ..evaluation.efficiency import DEMO_CONFIG, demo_tokenizer, random_demo_models
    from ..model.controls import control_from_args

    if args.random_demo:
        hybrid, discrete = random_demo_models(DEMO_CONFIG)
        tok = demo_tokenizer(DEMO_CONFIG["vocab_size"])
        spec, label = {"source": "random", "config": DEMO_CONFIG}, "random demo-size models"
        config = None
    else:
        from ..training.checkpoint import load_checkpoint

        hybrid, tok, config = load_checkpoint(args.checkpoint)
        discrete, _, _ = load_checkpoint(args.baseline)
        spec, label = (
            {"source": "checkpoint", "checkpoint": str(args.checkpoint)},
            f"{args.checkpoint} vs {args.baseline}",
        )
    if hybrid.config.arch != "hybrid" or discrete.config.arch != "discrete":
        raise ValueError("--checkpoint must hold a hybrid model and --baseline a discrete one")
    control = control_from_args(config, args).as_dict()
    report = run_bench(hybrid, discrete, tok, memory_spec=spec, repeats=args.repeats, label=label, control=control)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))


def _bench_args(p):
    from ..training.checkpoint import DEFAULT_BASELINE

    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid checkpoint")
    p.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="the discrete baseline checkpoint")
    p.add_argument("--repeats", type=_at_least_seven, default=7, help="timed runs of each side (median; at least 7)")
    add_control_args(p)  # where the hybrid runs in the latency, cache and decode timings (default u = 0)
    p.add_argument(
        "--random-demo",
        action="store_true",
        help="randomly initialised demo-size models instead of checkpoints (latency and memory only)",
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _at_least_seven(text: str) -> int:
    value = int(text)
    if value < 7:
        raise argparse.ArgumentTypeError(
            f"repeats must be at least 7 (the median of fewer runs is too noisy), got {value}"
        )
    return value


@command("evaluate", "judge steered generations and check both models on the held-out split")
def _evaluate(args):
    from ..training.checkpoint import is_user_checkpoint

    if is_user_checkpoint(args.checkpoint):
        from ..evaluation.axis_eval import run  # its own axes, judged by the judges trained on its file
        from ..training.checkpoint import matching_default_baseline

        baseline = args.baseline if args.baseline is not None else matching_default_baseline(args.checkpoint)
    else:
        from ..evaluation.evaluate import run
        from ..training.checkpoint import DEFAULT_BASELINE

        baseline = args.baseline if args.baseline is not None else DEFAULT_BASELINE
    from ..evaluation.measures import SEED

    seed = SEED if args.seed is None else args.seed
    print(run(args.checkpoint, baseline, quick=args.quick, as_json=args.json, steer_u=args.steer_u, seed=seed))


def _evaluate_args(p):

    p.add_argument("--quick", action="store_true", help="fewer prompts and held-out reviews (for tests)")
    p.add_argument(
        "--steer-u",
        type=float,
        default=None,
        help="|u| at which steering is judged (default: the |u| the checkpoint's stage 2 steered at)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the generations' seed (default: the evaluation's fixed one); the sampled figures (judges, valid "
        "words, trigrams, perplexity ratio) move with it, so quote a noisy one over several",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument(
        "--baseline",
        default=None,
        help="the discrete baseline's folder (default: the shipped one; a model of one's own on another "
        "tokenizer is then evaluated alone)",
    )


ARGUMENTS = {"train": _train_args, "generate": _generate_args, "bench": _bench_args, "evaluate": _evaluate_args}


@command("depth", "does the ODE block do work? its bits/byte, curvature, divergence and NFE levels, even mid-training")
def _depth(args):
    from ..evaluation.depth_report import run

    print(run(args.path, args.texts, args.prompts, args.probe_prompts, args.json, args.baseline))


def _depth_args(p):
    from ..evaluation.depth_report import PROBE_PROMPTS, PROMPTS, TEXTS_PER_GROUP

    p.add_argument("path", nargs="?", default=str(DEFAULT_CHECKPOINT), help="a checkpoint, or a training run's --out")
    p.add_argument(
        "--texts", type=_positive_int, default=TEXTS_PER_GROUP, help="held-out openings per label and source"
    )
    p.add_argument(
        "--prompts", type=_positive_int, default=PROMPTS, help="held-out prompts for divergence and NFE (%(default)s)"
    )
    p.add_argument(
        "--probe-prompts",
        type=_positive_int,
        default=PROBE_PROMPTS,
        help="probe prompts for the NFE levels (%(default)s)",
    )
    p.add_argument(
        "--baseline",
        help="the discrete model whose middle load block_skip_bpb is held to (default: the shipped one, "
        "when the tokenizers match)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


ARGUMENTS["depth"] = _depth_args


@command("compare", "two checkpoints side by side: bits/byte, depth, curvature, NFE, steering, size, latency")
def _compare(args):
    from ..evaluation.compare import run

    print(run(args.a, args.b, quick=args.quick, as_json=args.json))


def _compare_args(p):
    p.description = (
        "Both models' figures measured in one run, B over A for each; a figure one of them cannot give (no ODE "
        "block, other axes, other training text) is listed as skipped with the reason."
    )
    p.add_argument("a", help="a checkpoint folder (hybrid or discrete)")
    p.add_argument("b", help="another checkpoint folder")
    p.add_argument("--quick", action="store_true", help="fewer texts, prompts and timings (for tests)")
    p.add_argument("--json", action="store_true", help="print one JSON object: a, b, ratios, skipped, commands")


ARGUMENTS["compare"] = _compare_args


@command("tokenizer", "train the byte-level BPE tokenizer on the training split (both models then share it)")
def _tokenizer(args):
    from ..data import reviews as data
    from ..data.tokenizer import train_tokenizer

    if args.vocab_size < 257:
        raise ValueError(f"--vocab-size must be at least 257 (256 bytes and the start token), got {args.vocab_size}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    train_tokenizer((r.text for r in data.train_reviews()), args.vocab_size).save(str(out))
    print(f"wrote {out}")


def _tokenizer_args(p):
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--out", default="runs/tokenizer.json", help="where to write tokenizer.json")


ARGUMENTS["tokenizer"] = _tokenizer_args


@command("judges", "train the sentiment and style judges on the corpus and write them as plain files")
def _judges(args):
    from ..judges.judge import SHIPPED_DIR, build_judges

    out = args.out or str(SHIPPED_DIR)
    for name, accuracy in build_judges(out).items():
        print(f"{name} judge: held-out accuracy {accuracy:.4f}")
    print(f"wrote {out}")


def _judges_args(p):
    p.add_argument("--out", default=None, help="output folder (default assets/judge)")


ARGUMENTS["judges"] = _judges_args


@command("bench-train", "training tokens/s, fp32 vs bf16 autocast, hybrid and discrete at the flagship's size")
def _bench_train(args):
    from ..training.bench import format_throughput, measure_training_throughput

    result = measure_training_throughput(args.steps, args.rounds, args.threads)
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_throughput(result))


def _bench_train_args(p):
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--steps", type=int, default=2, help="timed steps of each configuration per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of turns over the four configurations")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the recipe gives each model one)")


ARGUMENTS["bench-train"] = _bench_train_args


@command("sampling", "the evaluation's text figures under each candidate sampler (how the defaults were chosen)")
def _sampling(args):
    from ..evaluation.evaluate import sampling_sweep

    report = sampling_sweep(args.checkpoint, n_prompts=args.prompts, steer_u=args.steer_u)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    keys = list(next(iter(report.values())))
    print(f"{'sampler':26s} " + " ".join(f"{k[:14]:>14s}" for k in keys))
    for name, row in report.items():
        print(f"{name:26s} " + " ".join(f"{row[k]:14.3f}" for k in keys))


def _sampling_args(p):
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument("--prompts", type=int, default=50, help="held-out prompts (the evaluation uses 50)")
    p.add_argument("--steer-u", type=float, default=None, help="|u| of the steered settings (default: trained)")


ARGUMENTS["sampling"] = _sampling_args


@command("analyze", "trajectories, PCA map, solver divergence, NFE regimes, lens, contraction, convergence, probes")
def _analyze(args):
    from .analyze import run_analyze

    run_analyze(args, lambda trained: solver_from_args(args, trained))


def _analyze_args(p):
    from .analyze import add_analyze_args

    add_analyze_args(p)
    add_solver_args(p)


ARGUMENTS["analyze"] = _analyze_args


@command(
    "experiments", "the paper's experiments on our model and against activation steering: results.json + results.md"
)
def _experiments(args):
    from ..evaluation.experiments import run

    print(run(args.checkpoint, args.baseline, args.out, quick=args.quick, only=args.only))


def _experiments_args(p):
    p.add_argument("--quick", action="store_true", help="small sizes everywhere (for tests; minutes become seconds)")
    p.add_argument(
        "--only",
        choices=("regimes-map",),
        default=None,
        help="recompute one section into the existing results.json (and rewrite results.md)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for results.json and results.md (default: assets/results for the shipped hybrid, "
        "CHECKPOINT/results for any other, where the lab's Results page looks)",
    )
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument(
        "--baseline",
        default=None,
        help="the discrete baseline's folder (default: the shipped one; a model of one's own on another "
        "tokenizer is then evaluated alone)",
    )


ARGUMENTS["experiments"] = _experiments_args


@command("export-talk", "one self-contained offline HTML demo: every slider position precomputed, no network")
def _export_talk(args):
    from ..lab.talk import export_talk

    say = None if args.quiet else (lambda message: print(message, file=sys.stderr, flush=True))
    from ..model.controls import control_from_args
    from ..training.checkpoint import read_config

    known = (Path(args.checkpoint) / "config.json").is_file()  # else export_talk says what is wrong with it
    control = control_from_args(read_config(args.checkpoint) if known else None, args).as_dict()
    report = export_talk(
        args.out,
        args.prompt,  # None: the model's first suggested prompt ('The movie was' for the shipped model)
        checkpoint=args.checkpoint,
        seed=args.seed,
        new_tokens=args.new_tokens,
        on_progress=say,
        control=control,
        compare_with=args.compare_with,
    )
    print(f"wrote {report.path} ({report.size / 2**20:.1f} MB in {report.seconds:.1f} s)")


def _export_talk_args(p):
    p.add_argument("--out", default="talk.html", help="the HTML file to write")
    p.add_argument(
        "--prompt",
        action="extend",
        nargs="+",
        default=None,
        help="prompt(s) to precompute (repeat or list several; the page gets a selector); default 'The movie was' "
        "(a model trained with --data: the opening of one of its held-out texts)",
    )
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument("--seed", type=int, default=0, help="sampling seed, the same at every control")
    p.add_argument("--new-tokens", dest="new_tokens", type=int, default=24, help="tokens generated per control")
    add_control_args(p)  # where the page opens: u₁ on its grid (-2..2), u₂ one of -1, 0, 1
    p.add_argument(
        "--compare-with", default=None, metavar="CHECKPOINT", help="a second model whose text shows beside the first's"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


ARGUMENTS["export-talk"] = _export_talk_args


@command("figures", "the lab's key figures as slides: PNG (1920x1080) and SVG, via plotly's export and Chromium")
def _figures(args):
    import time as _time

    from ..lab.figure_export import Inputs, build_figures, find_browser, parse_names, write_figures

    names = parse_names(args.only, pair=args.compare_with is not None)
    browser = find_browser()  # before minutes of computing, not after
    say = (
        (lambda name, s: None)
        if args.quiet
        else (lambda name, s: print(f"built {name} in {s:.1f} s", file=sys.stderr, flush=True))
    )
    start = _time.perf_counter()
    from ..evaluation.results_table import results_folder
    from ..lab.figure_export import DEFAULT_U
    from ..model.controls import control_from_args, given
    from ..training.checkpoint import read_config

    control = control_from_args(read_config(args.checkpoint), args).values if given(args) else (DEFAULT_U, 0.0)
    inputs = Inputs(
        checkpoint=Path(args.checkpoint),
        baseline=Path(args.baseline),
        results=Path(args.results) if args.results else results_folder(args.checkpoint),
        prompt=args.prompt,
        control=control,
        compare_with=Path(args.compare_with) if args.compare_with else None,
    )
    figures = build_figures(names, inputs, on_built=say)
    built = _time.perf_counter()
    paths = write_figures(figures, Path(args.out), browser=browser)
    print(
        f"wrote {len(paths)} files ({len(figures)} figures, PNG and SVG) to {args.out} in "
        f"{_time.perf_counter() - start:.1f} s ({built - start:.1f} s computing, "
        f"{_time.perf_counter() - built:.1f} s exporting with {browser})"
    )


def _figures_args(p):
    import argparse as _argparse

    from ..lab.figure_export import DEFAULT_PROMPT, DEFAULT_U, FIGURES
    from ..training.checkpoint import DEFAULT_BASELINE

    p.formatter_class = _argparse.RawDescriptionHelpFormatter
    p.description = (
        "Writes OUT/NAME.png (1920x1080) and OUT/NAME.svg for each figure, at the lab's presenter type "
        "size.\n\nThe browser plotly's export (Kaleido) drives: $BROWSER_PATH when set, else the first "
        "of chromium,\nchromium-browser, google-chrome, google-chrome-stable, chrome on PATH (Debian: "
        "apt-get install chromium).\nNothing is downloaded; with no browser the command stops and says so."
    )
    p.add_argument("--out", required=True, help="folder for the PNG and SVG files")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="the discrete baseline (training curves)")
    p.add_argument(
        "--results",
        default=None,
        help="folder of results.json (activation steering; default: where `experiments` writes the checkpoint's, "
        "assets/results for the shipped hybrid, CHECKPOINT/results for any other)",
    )
    p.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(FIGURES)} (default all)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the prompt the model figures use")
    p.add_argument(
        "--compare-with", default=None, metavar="CHECKPOINT", help="the comparison slide's second model (compare)"
    )
    add_control_args(p)
    p.description += (
        f"\n\nThe single-u figures' control: --u NAME=VALUE on the checkpoint's axes (default: the first "
        f"at {DEFAULT_U:g})."
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


ARGUMENTS["figures"] = _figures_args


def build_parser() -> argparse.ArgumentParser:
    # `steering` is the console script `pip install -e .` installs; it runs main() below, as -m does
    installed = bool(sys.argv) and os.path.basename(sys.argv[0]) == "steering"
    parser = argparse.ArgumentParser(prog="steering" if installed else "python -m steering", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        ARGUMENTS.get(name, lambda _: None)(p)
        p.set_defaults(func=fn)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (CheckpointError, SolverStepLimitError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
