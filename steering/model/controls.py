"""The control u by a checkpoint's own axis names: `--u NAME=VALUE` on every command that steers.

The shipped model's axes are sentiment and style (`--sentiment` and `--style` stay as their
shortcuts); a model trained on one's own file has the file's axes (user_data.axes_of). An axis
left out is 0. An unknown name, a value that is not a finite number in [-3, 3], or a shortcut the
checkpoint has no axis for is refused with the checkpoint's axis names and ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..data.user_data import axes_of, is_user_model
from .ode import CONTROL_AXES, CONTROL_LIMIT


class ControlError(ValueError):
    """A control the checkpoint cannot take (the CLI exits 2 with this message)."""


@dataclass(frozen=True)
class NamedControl:
    names: tuple[str, ...]  # the checkpoint's axes, in the control's order
    values: tuple[float, ...]  # one per model control dimension (an axis the model lacks stays 0)

    def as_dict(self) -> dict[str, float]:
        """{axis name: value} for each of the checkpoint's axes: what output names."""
        return dict(zip(self.names, self.values))

    def describe(self) -> str:
        return ", ".join(f"{name} {value:+g}" for name, value in self.as_dict().items())


def axis_names(config: dict | None) -> tuple[str, ...]:
    return tuple(a.name for a in axes_of(config))


def axes_help(config: dict | None) -> str:
    """The checkpoint's axes and their range, for error messages."""
    return ", ".join(f"{name} in [{-CONTROL_LIMIT:g}, {CONTROL_LIMIT:g}]" for name in axis_names(config))


def _value(name: str, raw, config) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ControlError(f"{name}={raw!r} is not a number; this checkpoint's axes: {axes_help(config)}") from None
    if not math.isfinite(value):
        raise ControlError(f"{name}={raw} is not a finite number; this checkpoint's axes: {axes_help(config)}")
    if abs(value) > CONTROL_LIMIT:
        raise ControlError(
            f"{name}={raw} is outside [{-CONTROL_LIMIT:g}, {CONTROL_LIMIT:g}]; "
            f"this checkpoint's axes: {axes_help(config)}"
        )
    return value


def named_control(
    config: dict | None, pairs: list[str] | None = None, shortcuts: dict[str, float | None] | None = None
) -> NamedControl:
    """The control of `--u NAME=VALUE` pairs and the shipped model's shortcuts ({"sentiment": value or None})."""
    names = axis_names(config)
    values = [0.0] * len(CONTROL_AXES)
    given: set[str] = set()
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ControlError(f"--u takes NAME=VALUE, got {pair!r}; this checkpoint's axes: {axes_help(config)}")
        if name not in names:
            raise ControlError(f"no axis {name!r} in this checkpoint; its axes: {axes_help(config)}")
        if name in given:
            raise ControlError(f"axis {name!r} given twice")
        values[names.index(name)] = _value(name, raw.strip(), config)
        given.add(name)
    for flag, raw in (shortcuts or {}).items():
        if raw is None:
            continue
        if is_user_model(config) or flag not in names:
            raise ControlError(
                f"--{flag} is the shipped model's shortcut; this checkpoint's axes are {axes_help(config)}: "
                f"use --u NAME=VALUE"
            )
        if flag in given:
            raise ControlError(f"axis {flag!r} given twice (--{flag} and --u {flag}=...)")
        values[names.index(flag)] = _value(flag, raw, config)
        given.add(flag)
    return NamedControl(names=names, values=tuple(values))


def control_from_args(config: dict | None, args) -> NamedControl:
    """The control of a command's `--u` pairs and `--sentiment` / `--style` shortcuts (add_control_args)."""
    return named_control(config, args.u, {"sentiment": args.sentiment, "style": args.style})


def given(args) -> bool:
    """Whether any control flag was given (a command may then differ from its own default control)."""
    return bool(args.u) or args.sentiment is not None or args.style is not None


def internal_axis(config: dict | None, name: str) -> str:
    """The model's own name for the control dimension of axis `name` (analysis code sweeps "sentiment" or
    "style", the control's first and second entries)."""
    names = axis_names(config)
    if name in CONTROL_AXES and not is_user_model(config):
        return name
    if name not in names:
        raise ControlError(f"no axis {name!r} in this checkpoint; its axes: {axes_help(config)}")
    return CONTROL_AXES[names.index(name)]
