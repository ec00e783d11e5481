"""`python -m steering analyze regimes-effort`: dopri5's NFE per u beside the path's curvature, and their rank
correlation against shuffled u (analysis/regimes_effort.py). Apart from analyze.py, which holds every other kind,
to keep that module readable."""

from __future__ import annotations

import numpy as np

from ..data.heldout import prompt_set

# the command line's --rtol/--atol defaults (cli/main.py): left as they are, the effort runs at its own default,
# the tolerance where the shipped model's float64 NFE over u takes two levels
SOLVER_FLAG_DEFAULTS = (1e-3, 1e-4)


def effort_tolerances(args) -> tuple[float, float]:
    from ..analysis.regimes_effort import DEFAULT_ATOL, DEFAULT_RTOL

    if (args.rtol, args.atol) == SOLVER_FLAG_DEFAULTS:
        return DEFAULT_RTOL, DEFAULT_ATOL
    return args.rtol, args.atol


def regimes_effort(args, model, tok, grid: np.ndarray):
    """(report, text) for analyze.py's ANALYSES: each prompt's FieldEffort and one line of reading."""
    from ..analysis.regimes_effort import field_effort

    probe = args.prompt_set == "probe"  # a model of one's own: its openings
    if args.prompt_set is None:
        prompts = [args.prompt]
    else:
        prompts = list(args.probe_prompts) if probe else prompt_set(args.prompt_set, tok, args.n_prompts)
    other = args.style if args.axis == "sentiment" else args.sentiment
    rtol, atol = effort_tolerances(args)
    efforts = [
        field_effort(
            model,
            tok,
            p,
            grid,
            rtol=rtol,
            atol=atol,
            axis=args.axis,
            other=other,
            n_tau=args.n_tau or 33,
            path_rtol=args.reference_rtol,
            path_atol=args.reference_atol,
            draws=args.null_draws,
            max_steps=args.max_steps,
        )
        for p in prompts
    ]
    lines = [
        f"dopri5 at rtol {rtol:g}, atol {atol:g} over {len(grid)} u in [{grid[0]:g}, {grid[-1]:g}], float64; "
        f"curvature on {efforts[0].n_tau} τ points of dopri5 at rtol {args.reference_rtol:g}; "
        f"Spearman's rho of NFE with it against {args.null_draws} shuffles of u"
    ]
    lines += [f"{e.prompt!r} ({e.seconds:.1f} s): {e.reading()}" for e in efforts]
    report = {"prompts": [e.to_dict() for e in efforts], "prompt_set": args.prompt_set, "rtol": rtol, "atol": atol}
    return report, "\n".join(lines)
