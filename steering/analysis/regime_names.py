"""The regimes a map holds, found and named from its numbers: each tolerance row's NFE levels and the u-intervals
that hold them, and for the rows with two levels or more which side of u costs more and by how many steps, where
the switches lie, whether one sits at the semantic crossover, and what sets the split (the cells' reasons).

Nothing here solves: everything is read off a PromptMap (steering.analysis.regimes_map).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .regimes import ALIGNED_WITHIN
from .regimes_map import ATOL_RATIO, EVALS_PER_STEP, PromptMap, predicted_nfe

# what sets a split, by the costlier cells' reasons: the cap is the first-step rule, the others the field's error
SET_BY = {
    "cap-limited": "the first-step rule (every step grew by the 10× cap)",
    "error-limited": "the field's own error (it held a step's growth under the cap)",
    "rejected": "the field's own error (rejected steps)",
}


@dataclass
class RowRegimes:
    t: float  # rtol (atol t/10)
    levels: list[int]  # the NFE levels over u, ascending
    intervals: dict[int, list[tuple[float, float]]]  # level -> the (first u, last u) of each contiguous run holding it
    switch_u: list[float]  # midway between neighbouring grid points whose counts differ
    kind: str | None = None  # rows of two levels or more: the costlier cells' reason, rejected > error- > cap-limited
    costlier: str | None = None  # where the top level lies: "u < 0", "u > 0", "both ends", "the middle" or "mixed"
    symmetric: bool | None = None  # the top level's u mirror themselves (u → −u)
    extra_steps: float | None = None  # (top − bottom level) / EVALS_PER_STEP
    crossover_to_switch: float | None = None  # distance from the crossover to the nearest switch
    at_crossover: bool | None = None  # that distance within ALIGNED_WITHIN
    # error-limited rows: whether a costlier cell took more than the fewest steps its first step and the 10× cap
    # allow (2 + 6·k); if none did, the error held a growth without costing a step and the first-step rule split them
    beyond_first_step: bool | None = None

    def to_dict(self) -> dict:
        return {**self.__dict__, "intervals": {str(k): v for k, v in self.intervals.items()}}


def _runs(u: np.ndarray, nfe: np.ndarray) -> list[tuple[int, float, float]]:
    """(level, first u, last u) of each run of equal counts along u."""
    runs, start = [], 0
    for k in range(1, len(nfe) + 1):
        if k == len(nfe) or nfe[k] != nfe[start]:
            runs.append((int(nfe[start]), float(u[start]), float(u[k - 1])))
            start = k
    return runs


def _costlier_side(u: np.ndarray, top: np.ndarray) -> str:
    """Where the cells at the top level lie along u (top: a mask over u)."""
    below, above = bool((top & (u < 0)).any()), bool((top & (u > 0)).any())
    if below != above:
        return "u < 0" if below else "u > 0"
    inner = top[(u > u[0]) & (u < u[-1])]
    if top[0] and top[-1] and not inner.all():
        return "both ends" if not top[np.argmin(np.abs(u))] else "mixed"
    return "the middle" if not (top[0] or top[-1]) else "mixed"


def _row_kind(reasons: list[str]) -> str:
    return next(r for r in ("rejected", "error-limited", "cap-limited") if r in reasons)


def name_row(u, nfe, reasons: list[str], t: float, crossover_u: float | None = None, first_step=None) -> RowRegimes:
    """One tolerance row's regimes, from its counts and reasons over u (u ascending); first_step (the first step
    each solve tried) tells an error-limited split the error paid for from one the first-step rule made."""
    u, nfe = np.asarray(u, dtype=float), np.asarray(nfe, dtype=int)
    runs = _runs(u, nfe)
    levels = sorted({level for level, _, _ in runs})
    row = RowRegimes(
        t=float(t),
        levels=levels,
        intervals={level: [(a, b) for lv, a, b in runs if lv == level] for level in levels},
        switch_u=[float((u[k] + u[k + 1]) / 2) for k in np.flatnonzero(nfe[1:] != nfe[:-1])],
    )
    if len(levels) < 2:
        return row
    top = nfe == levels[-1]
    # the costlier cells say what set the split: what made them take more evaluations than the rest
    row.kind = _row_kind([r for r, is_top in zip(reasons, top) if is_top])
    row.costlier = _costlier_side(u, top)
    if row.kind == "error-limited" and first_step is not None:
        row.beyond_first_step = any(predicted_nfe(float(h)) < n for h, n in zip(np.asarray(first_step)[top], nfe[top]))
    mirrored = {round(-x, 6) for x in u[top]}
    row.symmetric = mirrored <= {round(x, 6) for x in u} and mirrored == {round(x, 6) for x in u[top]}
    row.extra_steps = (levels[-1] - levels[0]) / EVALS_PER_STEP
    if crossover_u is not None:
        row.crossover_to_switch = min(abs(s - crossover_u) for s in row.switch_u)
        row.at_crossover = row.crossover_to_switch <= ALIGNED_WITHIN + 1e-9
    return row


def name_regimes(m: PromptMap) -> list[RowRegimes]:
    """Every tolerance row of the map named, tightest first."""
    return [name_row(m.u, m.nfe[i], m.reason[i], float(t), m.crossover_u, m.first_step[i]) for i, t in enumerate(m.t)]


def _group_key(r: RowRegimes) -> tuple:
    """Rows that read alike: the same levels held on the same u, split by the same reason."""
    return (tuple(r.levels), tuple((k, tuple(v)) for k, v in r.intervals.items()), r.kind)


def _num(x: float) -> str:
    return f"{x:.2g}" if abs(x) >= 0.05 else "0"


def _where(spans: list[tuple[float, float]], u_min: float, u_max: float) -> str:
    """Where a level holds along u, in words: "|u| ≤ 1.2", "|u| ≥ 1.4", "u ≤ −1.8", "0.1 ≤ u ≤ 0.5", ..."""
    if len(spans) == 2 and spans[0] == (u_min, -spans[1][0]) and spans[1][1] == u_max:
        return f"|u| ≥ {_num(spans[1][0])}"
    parts = []
    for a, b in spans:
        if a == u_min and b == u_max:
            parts.append("every u")
        elif a == b:
            parts.append(f"u = {_num(a)}")
        elif a == -b and a > u_min:
            parts.append(f"|u| ≤ {_num(b)}")
        elif a == u_min:
            parts.append(f"u ≤ {_num(b)}")
        elif b == u_max:
            parts.append(f"u ≥ {_num(a)}")
        else:
            parts.append(f"{_num(a)} ≤ u ≤ {_num(b)}")
    return " and ".join(parts)


def _tolerances(rows: list[RowRegimes], t_min: float, t_max: float) -> str:
    lo, hi = rows[0].t, rows[-1].t
    if lo == hi:
        return f"at rtol {lo:.2g}"
    if lo == t_min:
        return f"at rtol ≤ {hi:.2g}"
    return f"at rtol ≥ {lo:.2g}" if hi == t_max else f"at rtol {lo:.2g}–{hi:.2g}"


SIDE = {
    "both ends": "at the steered ends",
    "u < 0": "on the u < 0 side",
    "u > 0": "on the u > 0 side",
    "the middle": "in the middle of u",
}


def is_clean(r: RowRegimes) -> bool:
    """Two levels, each on at most two spans of u, the costlier on one side, both ends or the middle: a regime
    boundary, not the scatter of tight tolerances where one step more or less comes and goes from u to u."""
    return len(r.levels) == 2 and r.costlier != "mixed" and all(len(s) <= 2 for s in r.intervals.values())


def _set_by(r: RowRegimes) -> str:
    if r.beyond_first_step is False:
        return "the first-step rule (the error held a step's growth under the cap but cost no step)"
    return SET_BY[r.kind]


def _describe(group: list[RowRegimes], u_min: float, u_max: float, t_min: float, t_max: float) -> str:
    r = group[0]  # all rows of a group hold the same levels on the same u
    low, high = r.levels
    steps = f"{r.extra_steps:g} step{'s' if r.extra_steps != 1 else ''}"
    side = SIDE[r.costlier] + (" (symmetric in u)" if r.symmetric and r.costlier == "both ends" else "")
    switches = ", ".join(f"{x:+.2f}" for x in r.switch_u)
    return (
        f"{_tolerances(group, t_min, t_max)}, {low} NFE for {_where(r.intervals[low], u_min, u_max)} and {high} for "
        f"{_where(r.intervals[high], u_min, u_max)}, {steps} dearer {side}, set by {_set_by(r)}; "
        f"{'switches' if len(r.switch_u) > 1 else 'switch'} at u ≈ {switches}"
    )


def _at_crossover(clean: list[RowRegimes], scattered: list[RowRegimes], crossover_u: float | None) -> str:
    if crossover_u is None:
        return "No semantic crossover lies on the u grid."
    text = f"The semantic crossover (u ≈ {crossover_u:+.2f}): "
    if clean:
        aligned = [r for r in clean if r.at_crossover]
        nearest = min(clean, key=lambda r: r.crossover_to_switch)
        text += (
            f"a clean switch within {ALIGNED_WITHIN:g} of it at rtol {', '.join(f'{r.t:.2g}' for r in aligned)}"
            if aligned
            else f"no clean row switches within {ALIGNED_WITHIN:g} of it (the nearest, "
            f"{nearest.crossover_to_switch:.2f} away, at rtol {nearest.t:.2g})"
        )
    if scattered:
        near = sum(bool(r.at_crossover) for r in scattered)
        text += ("; " if clean else "") + f"{near} of the {len(scattered)} scattered rows have a switch that close"
    return text + "."


def regimes_reading(m: PromptMap) -> str:
    """One paragraph naming the map's regimes, every number from the map: the clean two-level rows (runs of rows
    that read alike together), the rows whose counts scatter over u, and where the semantic crossover falls."""
    rows = name_regimes(m)
    u_min, u_max = float(m.u[0]), float(m.u[-1])
    t_min, t_max = float(m.t[0]), float(m.t[-1])
    head = f"In {m.precision} (rtol t, atol {ATOL_RATIO:g}·t, t from {t_min:.2g} to {t_max:.2g})"
    split = [r for r in rows if r.kind is not None]
    if not split:
        levels = sorted({r.levels[0] for r in rows})
        return f"{head} NFE takes one level at every u of every row ({', '.join(map(str, levels))} NFE by tolerance)."
    clean = [r for r in split if is_clean(r)]
    scattered = [r for r in split if not is_clean(r)]
    groups: list[list[RowRegimes]] = []
    for i, r in enumerate(rows):  # consecutive clean rows that read alike, together
        previous = rows[i - 1] if i else None
        if is_clean(r) and groups and previous is groups[-1][-1] and _group_key(previous) == _group_key(r):
            groups[-1].append(r)
        elif is_clean(r):
            groups.append([r])
    text = f"{head} {len(split)} of {len(rows)} tolerance rows split over u."
    if groups:
        text += (
            " Clean two-level rows (each level on at most two spans of u): "
            + "; ".join(_describe(g, u_min, u_max, t_min, t_max) for g in groups)
            + "."
        )
    if scattered:
        ts = [r.t for r in scattered]
        kinds = sorted({r.kind for r in scattered}, key=list(SET_BY).index)
        text += (
            (f" At rtol {ts[0]:.2g}" if len(ts) == 1 else f" At {len(ts)} rows (rtol {min(ts):.2g} to {max(ts):.2g})")
            + " the counts scatter: up to "
            f"{max(len(r.levels) for r in scattered)} levels, one level on up to "
            f"{max(len(s) for r in scattered for s in r.intervals.values())} separate spans of u, set by "
            + " and ".join(SET_BY[k] for k in kinds)
            + "."
        )
    text += " " + _at_crossover(clean, scattered, m.crossover_u)
    one_level = len(rows) - len(split)
    if one_level:
        text += " The other row takes" if one_level == 1 else f" The other {one_level} rows take"
        text += " one level over u."
    return text
