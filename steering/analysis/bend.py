"""A 2-D view that keeps the bend of a family of paths: one axis along their chord, one along their departure.

The PCA map is fitted on where hidden states lie across prompts and controls, so its two or three
axes hold the spread between paths (prompt, u), not the small sideways excursion of one path from its
own chord: a path that bends in full space is drawn near straight there. This view is fitted on the
family itself (the paths of one prompt for a set of u, all starting at H(0)):

  chord axis   the mean of the paths' unit chords x(1) − x(0)
  bend axis    the first principal direction (uncentred) of every path's departure from its own chord,
               d⊥(τ) = d(τ) − (d(τ)·ĉ)ĉ with d(τ) = x(τ) − x(0), made orthogonal to the chord axis

Coordinates are (x(τ) − o)·axis with o the paths' mean start, on one scale for both axes: a figure
drawn with equal axis scales shows the bend at its true size. The share of the departures' energy the
bend axis holds (`bend_captured`) says how much of the bend one direction can show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class BendMap:
    origin: np.ndarray  # [width] the paths' mean start
    chord_axis: np.ndarray  # [width] unit
    bend_axis: np.ndarray  # [width] unit, orthogonal to chord_axis (zero when no path departs from its chord)
    bend_captured: float  # share of Σ|d⊥|² along bend_axis (0..1; nan when the paths are straight)

    def project(self, path) -> np.ndarray:
        """A path [T, ...] (trailing shape flattened to the fitted width) as [T, 2]: along the chord, along the bend."""
        x = _flat(path)
        if x.shape[1] != self.origin.shape[0]:
            raise ValueError(f"the path has width {x.shape[1]}; the view was fitted on width {self.origin.shape[0]}")
        centred = x - self.origin
        return np.stack([centred @ self.chord_axis, centred @ self.bend_axis], axis=1)


def _flat(path) -> np.ndarray:
    x = np.asarray(path, dtype=np.float64)
    if x.ndim < 2 or x.shape[0] < 2:
        raise ValueError(f"a path needs at least two points, shaped [T, width]; got shape {x.shape}")
    return x.reshape(x.shape[0], -1)


def fit_bend_map(paths) -> BendMap:
    """The chord × departure view of a family of paths [T, ...] of one width."""
    flat = [_flat(p) for p in paths]
    if not flat:
        raise ValueError("give at least one path")
    if len({x.shape[1] for x in flat}) > 1:
        raise ValueError("the paths have different widths")
    if not all(np.isfinite(x).all() for x in flat):
        raise ValueError("the paths have non-finite points")
    width = flat[0].shape[1]
    chords = np.array([x[-1] - x[0] for x in flat])
    lengths = np.linalg.norm(chords, axis=1)
    moved = lengths > 0
    origin = np.mean([x[0] for x in flat], axis=0)
    if not moved.any():  # nothing to draw along: every path is a point at the origin
        return BendMap(origin=origin, chord_axis=np.zeros(width), bend_axis=np.zeros(width), bend_captured=math.nan)
    units = chords[moved] / lengths[moved, None]
    chord_axis = units.mean(0)
    if np.linalg.norm(chord_axis) < 1e-9:  # chords that cancel out: the longest one's direction
        chord_axis = units[int(np.argmax(lengths[moved]))]
    chord_axis = chord_axis / np.linalg.norm(chord_axis)

    departures = []
    for x, unit in zip((x for x, m in zip(flat, moved) if m), units):
        d = x[1:] - x[0]
        departures.append(d - np.outer(d @ unit, unit))
    departures = np.concatenate(departures)
    departures = departures - np.outer(departures @ chord_axis, chord_axis)  # what the chord axis cannot show
    energy = float((departures**2).sum())
    bend_axis, captured = np.zeros(width), math.nan
    if energy > 1e-24 * max(float((chords**2).sum()), 1e-300):
        _, singular, vt = np.linalg.svd(departures, full_matrices=False)
        bend_axis = vt[0] - (vt[0] @ chord_axis) * chord_axis
        bend_axis = bend_axis / np.linalg.norm(bend_axis)
        if (departures @ bend_axis).sum() < 0:  # drawn bending up, whichever sign the SVD picked
            bend_axis = -bend_axis
        captured = float(singular[0] ** 2 / energy)
    return BendMap(origin=origin, chord_axis=chord_axis, bend_axis=bend_axis, bend_captured=captured)
