"""Work ahead of the user: compute what they will probably ask for next, on one background thread.

The Steer page uses it for the slider: after showing u it computes the views one slider
step either side, so a step (an arrow key, a click beside the handle) finds its result
ready. A request that was not foreseen is computed by the caller as usual; at worst it
waits for the one background job in progress, because both take the model's lock.
"""
from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from typing import Callable, Hashable, Iterable


class Prefetcher:
    """compute(key) for the keys most recently wanted, newest wish first, one at a time.

    result(key) returns the value, computing it in the caller's thread unless it is kept or
    in progress. want(keys) replaces the queue (the user has moved on, so older wishes are
    dropped); keys already kept or in progress are skipped. A background compute that
    raises is forgotten: result() then computes that key itself and the error surfaces
    where it belongs. The newest max_entries values are kept.

    The worker starts on a wish only after `delay` seconds without a newer one: it shares
    the interpreter lock with the page's own thread, which meanwhile finishes the run
    that made the wish (building figures, sending them); starting at once slowed that
    run by as much as the computation itself.
    """

    def __init__(self, compute: Callable[[Hashable], object], max_entries: int = 512, delay: float = 0.0):
        self._compute = compute
        self._delay = delay
        self._wished_at = 0.0
        self._max_entries = max_entries
        self._done: OrderedDict = OrderedDict()
        self._queue: list = []
        self._running = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def result(self, key: Hashable):
        """The value for key: kept, awaited if the worker is on it, else computed here (errors propagate)."""
        with self._cond:
            if key in self._queue:
                self._queue.remove(key)
            self._cond.wait_for(lambda: self._running != key)
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
        value = self._compute(key)
        with self._cond:
            self._keep(key, value)
        return value

    def want(self, keys: Iterable[Hashable]) -> None:
        with self._cond:
            self._queue = [k for k in keys if k not in self._done and k != self._running]
            self._wished_at = time.monotonic()
            if self._closed:
                self._queue = []
            elif self._thread is None:
                self._thread = threading.Thread(target=self._work, name="steer-prefetch", daemon=True)
                self._thread.start()
                # a daemon thread killed inside a torch op at interpreter exit aborts the process
                atexit.register(self.close)
            self._cond.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Stop working ahead: drop the queue and wait for the job in progress (result() still works)."""
        with self._cond:
            self._closed = True
            self._queue = []
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._running is None, timeout)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Until the queue is empty and nothing runs (for tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and self._running is None, timeout)

    def _work(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if self._closed:
                    return
                wait = self._wished_at + self._delay - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue        # the queue may have changed meanwhile
                key = self._running = self._queue.pop(0)
            try:
                value, ok = self._compute(key), True
            except Exception:   # noqa: BLE001 - the foreground recomputes it and reports the error
                value, ok = None, False
            with self._cond:
                if ok:
                    self._keep(key, value)
                self._running = None
                self._cond.notify_all()

    def _keep(self, key, value):
        self._done[key] = value
        self._done.move_to_end(key)
        while len(self._done) > self._max_entries:
            self._done.popitem(last=False)
