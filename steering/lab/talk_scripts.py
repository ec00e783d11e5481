"""Talk scripts: a JSON file of steps, each a page of the lab, its URL state and a one-line caption.

`?talk=NAME&step=K` opens step K (counted from 1) of assets/talks/NAME.json. Everything here is
plain data and plain functions, kept apart from Streamlit: a file name, a JSON file or a step
number that cannot be used becomes a TalkError or a notice, never a traceback.

The file:

    {"title": "The paper in 8 steps",
     "steps": [{"page": "steer", "params": {"prompt": "The movie was", "u": "-2"}, "caption": "…"}, …]}

`params` are query parameters as steering.lab.logic.to_query_params writes them (prompt, u, style, solver,
steps, tol, dims, presenter); keys left out take the lab's defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from . import logic

TALKS_DIR = Path(__file__).resolve().parents[2] / "assets" / "talks"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
STATE_KEYS = ("prompt", "u", "style", "solver", "steps", "tol", "dims", "presenter")
MAX_CAPTION = 240
MAX_BYTES = 256_000


class TalkError(ValueError):
    """A talk that cannot be used; the message says why, in words for the page."""


@dataclass(frozen=True)
class TalkStep:
    page: str
    params: dict[str, str]
    caption: str

    def state(self, presenter: bool | None = None) -> logic.LabState:
        """The lab state this step shows (validated when the talk was loaded); presenter mode kept
        as given, when given, so stepping through a talk never switches it."""
        state, _, _ = logic.parse_query_params(self.params)
        if presenter is not None:
            state = replace(state, presenter=presenter)
        return state


@dataclass(frozen=True)
class Talk:
    name: str
    title: str
    steps: tuple[TalkStep, ...]


def talk_names(folder: Path = TALKS_DIR) -> list[str]:
    return sorted(p.stem for p in Path(folder).glob("*.json") if NAME_PATTERN.fullmatch(p.stem))


def parse_talk(data, name: str) -> Talk:
    """A Talk from parsed JSON; every step is checked (page known, state parameters usable, one-line caption)."""
    if not isinstance(data, dict):
        raise TalkError(f"talk {name!r}: the file must hold a JSON object with a list of steps")
    title = data.get("title", name)
    if not isinstance(title, str) or not title.strip():
        raise TalkError(f"talk {name!r}: 'title' must be text")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise TalkError(f"talk {name!r}: 'steps' must be a non-empty list")
    steps = []
    for k, raw in enumerate(raw_steps, start=1):
        where = f"talk {name!r}, step {k}"
        if not isinstance(raw, dict):
            raise TalkError(f"{where}: a step must be an object with page, params and caption")
        page = raw.get("page")
        if not isinstance(page, str) or page not in logic.PAGES:
            raise TalkError(f"{where}: page {page!r} is unknown; pages are {', '.join(logic.PAGES)}")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            raise TalkError(f"{where}: 'params' must be an object of query parameters")
        unknown = sorted(set(params) - set(STATE_KEYS))
        if unknown:
            raise TalkError(
                f"{where}: unknown parameter(s) {', '.join(map(repr, unknown))}; use {', '.join(STATE_KEYS)}"
            )
        if any(not isinstance(v, (str, int, float)) or isinstance(v, bool) for v in params.values()):
            raise TalkError(f"{where}: parameter values must be text or numbers")
        params = {key: str(value) for key, value in params.items()}
        _, _, notices = logic.parse_query_params(params)
        if notices:
            raise TalkError(f"{where}: {notices[0]}")
        caption = raw.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise TalkError(f"{where}: 'caption' must be a line of text")
        if "\n" in caption.strip() or len(caption) > MAX_CAPTION:
            raise TalkError(f"{where}: the caption must be one line of at most {MAX_CAPTION} characters")
        steps.append(TalkStep(page=page, params=params, caption=caption.strip()))
    return Talk(name=name, title=title.strip(), steps=tuple(steps))


def load_talk(name: str, folder: Path = TALKS_DIR) -> Talk:
    """assets/talks/NAME.json, parsed and checked. The name is a plain word (no path), so a link
    can only open a talk that ships in the folder."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise TalkError(f"talk={logic._shorten(str(name), 40)!r} is not a talk name (letters, digits, '-' and '_')")
    path = Path(folder) / f"{name}.json"
    if not path.is_file():
        known = talk_names(folder)
        raise TalkError(f"there is no talk {name!r}; talks: {', '.join(known) if known else 'none'}")
    raw = path.read_bytes()
    if len(raw) > MAX_BYTES:
        raise TalkError(f"talk {name!r}: the file is larger than {MAX_BYTES // 1000} kB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TalkError(f"talk {name!r}: {path.name} is not valid JSON ({err})") from None
    return parse_talk(data, name)


def talk_from_query(params: Mapping[str, object], folder: Path = TALKS_DIR) -> tuple[Talk | None, int, list[str]]:
    """(talk or None, step index from 0, notices) from a link's `talk` and `step` parameters.

    A talk that cannot be loaded gives None and a notice; a step that is not a whole number or
    is out of range is clamped into 1…N with a notice (as the lab clamps u).
    """
    name = logic._as_single(params.get("talk"))
    if name is None or not name.strip():
        return None, 0, []
    try:
        talk = load_talk(name.strip(), folder)
    except TalkError as err:
        return None, 0, [f"{err}. Showing the page without the talk."]
    notices: list[str] = []
    raw = logic._as_single(params.get("step"))
    n = len(talk.steps)
    step = logic.parse_int(raw, "step", 1, 1, n, notices) if raw is not None else 1
    return talk, step - 1, notices


def talk_query(talk: Talk, index: int, presenter: bool) -> dict[str, str]:
    """The URL of a talk position: the talk and the step (from 1), and presenter mode when on."""
    params = {"talk": talk.name, "step": str(index + 1)}
    if presenter:
        params["presenter"] = "1"
    return params
