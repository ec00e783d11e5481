"""One command line: python -m steering {train, generate, ...} --help"""
from __future__ import annotations

import argparse
import json
import sys

from .checkpoint import DEFAULT_CHECKPOINT, CheckpointError
from .ode import SOLVERS, SolverConfig, SolverStepLimitError

COMMANDS: dict = {}


def command(name: str, help: str):
    def register(fn):
        COMMANDS[name] = (fn, help)
        return fn
    return register


def add_solver_args(p: argparse.ArgumentParser):
    p.add_argument("--solver", default="euler", choices=SOLVERS, help="ODE solver for the continuous block")
    p.add_argument("--steps", type=int, default=4, help="steps of a fixed-step solver")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of an adaptive solver")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance of an adaptive solver")
    p.add_argument("--max-steps", type=int, default=2000, help="cap on adaptive steps (error beyond it)")


def solver_from_args(args) -> SolverConfig:
    return SolverConfig(args.solver, steps=args.steps, rtol=args.rtol, atol=args.atol, max_steps=args.max_steps)


@command("train", "train the hybrid or the discrete baseline (works under torchrun)")
def _train(args):
    from .train import make_config, train, train_config_fields
    overrides = {k: getattr(args, k) for k in train_config_fields() if hasattr(args, k)}
    overrides["out"] = args.out or f"runs/{args.arch}"
    out = train(make_config(args.preset, **overrides), progress=not args.no_progress)
    print(f"wrote {out}")


def _train_args(p):
    p.add_argument("--arch", default="hybrid", choices=["hybrid", "discrete"])
    p.add_argument("--preset", default="demo", choices=["tiny", "demo"])
    p.add_argument("--out", default=None, help="output folder (default runs/ARCH)")
    p.add_argument("--device", default=None, help="auto (CUDA if present), cpu, cuda")
    p.add_argument("--resume", action="store_true", default=None, help="continue from OUT/resume")
    p.add_argument("--tokenizer", default=None, help="reuse this tokenizer.json")
    p.add_argument("--no-progress", action="store_true")
    for name, typ in [("steps", int), ("stage2_steps", int), ("tokens_per_batch", int), ("stage2_tokens_per_batch", int), ("lr", float),
                      ("stage2_lr", float), ("warmup", int), ("control_dropout", float), ("rt_fraction", float), ("start_prob", float), ("stage2_start_prob", float), ("stage2_rt_fraction", float),
                      ("roughness_weight", float), ("stage2_roughness_weight", float), ("overlap_weight", float), ("stage2_overlap_weight", float), ("contrast_weight", float), ("style_contrast_weight", float), ("negative_contrast_weight", float), ("contrast_positive_side", float), ("contrast_early_weight", float), ("contrast_early_span", float), ("contrast_lexicon_weight", float), ("stage2_neutral_share", float), ("positive_kl_weight", float), ("negative_kl_weight", float), ("field_out_lr_scale", float), ("stage2_control_lr_scale", float), ("neighbor_drop", float), ("eval_every", int), ("contrast_u", float), ("save_every_s", float),
                      ("max_reviews", int), ("seed", int), ("vocab_size", int), ("block_size", int),
                      ("d_model", int), ("n_heads", int), ("field_hidden", int), ("field_heads", int),
                      ("n_pre", int), ("n_mid", int), ("n_post", int), ("control_embed_dim", int),
                      ("alpha_init", float)]:
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None)
    p.add_argument("--bf16", dest="bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="bf16 autocast in the forward pass (fp32 master weights, optimizer and loss)")
    p.add_argument("--stage2-trains", dest="stage2_trains", choices=["field", "field+post"], default=None)
    p.add_argument("--roughness-relative-to", dest="roughness_relative_to", choices=["state", "field"], default=None,
                   help="what the path-roughness penalty is relative to")
    p.add_argument("--freeze-alpha", dest="train_alpha", action="store_false", default=None,
                   help="keep α at --alpha-init (the field's weights still train)")
    p.add_argument("--stage2-roughness-relative-to", dest="stage2_roughness_relative_to", choices=["state", "field"],
                   default=None, help="stage 2's penalty reference (default: stage 1's)")
    p.add_argument("--field-norm", dest="field_norm", choices=["layer", "entry"], default=None,
                   help="what the field normalises H(τ) with: its own statistics, or those of H(0)")
    p.add_argument("--contrast-scale", dest="contrast_scale", type=float, default=None)
    p.add_argument("--contrast-axes", dest="contrast_axes", choices=["sentiment", "sentiment+style"], default=None)
    p.add_argument("--contrast-tokens", dest="contrast_tokens", choices=["all", "word_start", "word_start_sentiment"], default=None,
                   help="tokens the stage-2 contrast judges u on")
    p.add_argument("--stage2-neutral-lm", dest="stage2_neutral_lm", action=argparse.BooleanOptionalAction, default=None,
                   help="stage 2 also fits each window at u = 0")
    p.add_argument("--stage2-split-control", dest="stage2_split_control", action="store_true", default=None,
                   help="stage 2 embeds u > 0 and u < 0 with separate weights (each starting as stage 1's)")


@command("generate", "sample steered continuations of a prompt")
def _generate(args):
    from .checkpoint import load_checkpoint
    from .generate import generate
    model, tok, _ = load_checkpoint(args.checkpoint)
    results = generate(model, tok, args.prompt, args.sentiment, args.style, n=args.n,
                       max_new_tokens=args.max_new_tokens, seed=args.seed, solver=solver_from_args(args),
                       **{k: getattr(args, k) for k in ("temperature", "top_k", "top_p", "repetition_penalty",
                                                        "no_repeat_ngram") if getattr(args, k) is not None})
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return
    if results and results[0].notice:
        print(f"note: {results[0].notice}", file=sys.stderr)
    for i, r in enumerate(results):
        print(f"--- sample {i + 1} (sentiment {r.sentiment:+g}, style {r.style:+g}, NFE {r.nfe})")
        print(r.text)


def _generate_args(p):
    p.add_argument("--prompt", default="", help="text to continue (empty: start from scratch)")
    p.add_argument("--sentiment", type=float, default=0.0, help="-1 negative ... +1 positive (range -3..3)")
    p.add_argument("--style", type=float, default=0.0, help="-1 critic blurb ... +1 user review (range -3..3)")
    p.add_argument("--n", type=int, default=1, help="number of samples")
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument("--temperature", type=float, default=None, help="default: the sampler's (steering/generate.py)")
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
    from .bench import DEMO_CONFIG, demo_tokenizer, format_report, random_demo_models, run_bench
    if args.random_demo:
        hybrid, discrete = random_demo_models(DEMO_CONFIG)
        tok = demo_tokenizer(DEMO_CONFIG["vocab_size"])
        spec, label = {"source": "random", "config": DEMO_CONFIG}, "random demo-size models"
    else:
        from .checkpoint import load_checkpoint
        hybrid, tok, _ = load_checkpoint(args.checkpoint)
        discrete, _, _ = load_checkpoint(args.baseline)
        spec, label = {"source": "checkpoint", "checkpoint": str(args.checkpoint)}, f"{args.checkpoint} vs {args.baseline}"
    if hybrid.config.arch != "hybrid" or discrete.config.arch != "discrete":
        raise ValueError("--checkpoint must hold a hybrid model and --baseline a discrete one")
    report = run_bench(hybrid, discrete, tok, memory_spec=spec, repeats=args.repeats, label=label)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))


def _bench_args(p):
    from .checkpoint import DEFAULT_BASELINE
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid checkpoint")
    p.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="the discrete baseline checkpoint")
    p.add_argument("--repeats", type=_at_least_seven, default=7, help="timed runs of each side (median; at least 7)")
    p.add_argument("--random-demo", action="store_true",
                   help="randomly initialised demo-size models instead of checkpoints (latency and memory only)")


def _at_least_seven(text: str) -> int:
    value = int(text)
    if value < 7:
        raise argparse.ArgumentTypeError(f"repeats must be at least 7 (the median of fewer runs is too noisy), got {value}")
    return value


@command("evaluate", "judge steered generations and check both models on the held-out split")
def _evaluate(args):
    from .evaluate import run
    print(run(args.checkpoint, args.baseline, quick=args.quick, as_json=args.json, steer_u=args.steer_u))


def _evaluate_args(p):
    from .checkpoint import DEFAULT_BASELINE
    p.add_argument("--quick", action="store_true", help="fewer prompts and held-out reviews (for tests)")
    p.add_argument("--steer-u", type=float, default=None,
                   help="|u| at which steering is judged (default: the |u| the checkpoint's stage 2 steered at)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="the discrete baseline's folder")


ARGUMENTS = {"train": _train_args, "generate": _generate_args, "bench": _bench_args, "evaluate": _evaluate_args}


@command("tokenizer", "train the byte-level BPE tokenizer on the training split (both models then share it)")
def _tokenizer(args):
    from . import data
    from .tokenizer import train_tokenizer
    from pathlib import Path
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


@command("bench-train", "training tokens/s, fp32 vs bf16 autocast, hybrid and discrete at the flagship's size")
def _bench_train(args):
    from .train_bench import format_throughput, measure_training_throughput
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
    from .evaluate import sampling_sweep
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
    from .analysis.cli import run_analyze
    run_analyze(args, solver_from_args(args))


def _analyze_args(p):
    from .analysis.cli import add_analyze_args
    add_analyze_args(p)
    add_solver_args(p)


ARGUMENTS["analyze"] = _analyze_args


@command("experiments", "the paper's experiments on our model and against activation steering: results.json + results.md")
def _experiments(args):
    from .experiments import run
    print(run(args.checkpoint, args.baseline, args.out, quick=args.quick))


def _experiments_args(p):
    from .checkpoint import DEFAULT_BASELINE
    from .experiments import DEFAULT_OUT
    p.add_argument("--quick", action="store_true", help="small sizes everywhere (for tests; minutes become seconds)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="folder for results.json and results.md")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the hybrid model's folder")
    p.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="the discrete baseline's folder")


ARGUMENTS["experiments"] = _experiments_args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steering", description=__doc__)
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


if __name__ == "__main__":
    sys.exit(main())
