"""Start a command whose processes all end with the test: torchrun's workers start in sessions of their
own and outlive a killed agent (re-parented), so they are tracked by PID, the whole tree, as they appear."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, parent PID, start time) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2 :].split()  # the name in (...) may hold spaces
    return rest[0], int(rest[1]), int(rest[19])


def alive(pid: int, started: int | None = None) -> bool:
    """Running (a zombie has ended: only its exit status is left for its parent to collect); with
    `started`, only if it is still that process (its start time) and not a new one under a reused PID."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and started in (None, stat[2])


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[1] == pid:
            found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


class Launched:
    """A command started in a session of its own, output to a file (a pipe would be held open by
    re-parented workers). Every process seen in its tree is remembered; end() kills them all."""

    def __init__(self, cmd: list[str], log: Path, **kw):
        self.log = log
        self._out = open(log, "w")  # noqa: SIM115 (closed in end())
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        self.seen: dict[int, int] = {}  # PID: start time, of every process seen in its tree

    def tree(self) -> list[int]:
        """The processes now under the launched one (all of them also remembered in self.seen)."""
        now = descendants(self.proc.pid) if alive(self.proc.pid) else []
        for pid in now:
            if pid not in self.seen and (stat := _stat(pid)) is not None:
                self.seen[pid] = stat[2]
        return now

    def _running(self) -> list[int]:
        self.tree()
        survivors = [pid for pid, started in self.seen.items() if alive(pid, started)]
        return survivors + ([self.proc.pid] if self.proc.poll() is None else [])

    def workers(self) -> dict[int, int]:
        """{rank: PID} of the processes under it that torchrun gave a RANK."""
        return {int(env["RANK"]): pid for pid in self.tree() if "RANK" in (env := environ(pid))}

    def wait(self, timeout: float, until=None) -> int | None:
        """Its exit code, or None if `until()` came true first; fails (after end()) if neither within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.tree()
            if until is not None and until():
                return None
            if self.proc.poll() is not None:
                return self.proc.returncode
            time.sleep(0.05)
        self.end()
        raise AssertionError(f"still running after {timeout:.0f} s (killed); its output:\n{self.output()[-4000:]}")

    def left_behind(self, grace: float = 10.0) -> list[int]:
        """The processes ever seen in its tree still running after up to `grace` seconds."""
        deadline = time.monotonic() + grace
        while (left := self._running()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return left

    def end(self):
        """Kill every process of the tree, by PID: the launched one stopped first (so it starts no
        more), then all it has under it and all ever seen there, then itself; wait until they are gone."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)
        for _ in range(100):
            if not (targets := self._running()):
                break
            for pid in targets:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._out.close()

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()
