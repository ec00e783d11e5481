"""Work ahead of the user: compute what they will probably ask for next, on one background thread.

The Steer page uses it for the slider: after an input change it computes the whole range of
slider positions, nearest first, so a step or a far jump finds its result ready. A request
that was not foreseen is computed by the caller as usual.

Several sessions share one model, so they share its lock (FairLock): a page's own request
goes ahead of any background work waiting for the lock, a batch in progress lets it in between
two of its tokens (FairLock.pause_for_foreground), and the worker takes one session's next
batch, then the next session's, in turn, so one session's range never starves another
session's step. A batch in progress stops early (cooperatively, between tokens) once no
session wants any of its keys any more: the inputs changed again.
"""

from __future__ import annotations

import atexit
import itertools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import contextmanager, nullcontext

_local = threading.local()


def in_background() -> bool:
    """Whether this thread is a Prefetcher's worker (its lock requests then wait behind the pages')."""
    return getattr(_local, "background", False)


class FairLock:
    """A reentrant lock handed over in order: waiting foreground threads first, oldest first, then background ones.

    A plain (R)Lock lets the thread that releases it take it straight back, so a worker looping over
    batches could hold the model for as long as it has work while a page waits. Here every acquire
    takes a ticket; the lock goes to the best ticket (foreground before background, then first come).
    `background` defaults to whether the calling thread is a Prefetcher's worker.
    """

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._tickets: list[tuple[int, int, int]] = []  # (priority, arrival, thread): 0 foreground, 1 background
        self._seq = itertools.count()
        self._expedited: Counter = Counter()  # background threads a page waits on: they queue as foreground

    def _rank(self, ticket: tuple[int, int, int]) -> tuple[int, int]:
        priority, arrival, thread = ticket
        return (0 if thread in self._expedited else priority), arrival

    def _next(self) -> tuple[int, int, int]:
        return min(self._tickets, key=self._rank)

    def _take_turn(self, priority: int, me: int) -> None:
        """Queue a ticket and wait until it is the best one and the lock is free (self._cond held)."""
        ticket = (priority, next(self._seq), me)
        self._tickets.append(ticket)
        self._cond.wait_for(lambda: self._owner is None and self._next() == ticket)
        self._tickets.remove(ticket)

    def acquire(self, background: bool | None = None) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            self._take_turn(1 if (in_background() if background is None else background) else 0, me)
            self._owner, self._depth = me, 1
            return True

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a FairLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()

    def pause_for_foreground(self) -> bool:
        """Between two steps of background work: if a foreground thread waits, let it have the lock and
        take it back after it (at the depth held). True when it paused. The caller must hold the lock, and
        its own state must not be touched by what the foreground does meanwhile."""
        me = threading.get_ident()
        with self._cond:
            if self._owner != me or not any(self._rank(t)[0] == 0 for t in self._tickets):
                return False
            depth, self._owner, self._depth = self._depth, None, 0
            self._cond.notify_all()
            self._take_turn(1, me)
            self._owner, self._depth = me, depth
            return True

    @contextmanager
    def expedite(self, thread: int):
        """While a page waits for a background thread's result, that thread queues for the lock as a page would:
        other background work holding the lock lets it in at its next pause (no priority inversion)."""
        with self._cond:
            self._expedited[thread] += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._expedited[thread] -= 1
                if not self._expedited[thread]:
                    del self._expedited[thread]
                self._cond.notify_all()

    def waiting(self) -> tuple[int, int]:
        """(foreground, background) threads waiting for the lock."""
        with self._cond:
            fg = sum(1 for t in self._tickets if self._rank(t)[0] == 0)
            return fg, len(self._tickets) - fg

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class Prefetcher:
    """compute(key) for the keys most recently wanted, per session, newest wish first, one batch at a time.

    result(key) returns the value, computing it in the caller's thread unless it is kept or in
    progress. want(keys, session) replaces that session's queue (the user has moved on, so older
    wishes are dropped); keys already kept or in progress are skipped. A background compute that
    raises is forgotten: result() then computes that key itself and the error surfaces where it
    belongs. The newest max_entries values are kept.

    With compute_many(keys, cancelled) -> values, the worker computes a session's wish after its
    first `single` keys (the most likely next requests, computed one by one so they are ready
    soonest) in batches of up to `batch` keys; cancelled() turns True once no session wants any
    key of the batch any more (compute_many may then raise to stop early; its results are dropped).
    Sessions with work take turns, one batch each. With `lock` (the FairLock compute takes), a page awaiting a key
    in progress expedites the worker on that lock. on_done(session, seconds, count, last_key) is called
    on the worker when a session's whole wish has been computed (seconds since the wish, keys computed
    for it, the last of them).

    The worker starts on a wish only after `delay` seconds without a newer one: it shares
    the interpreter lock with the page's own thread, which meanwhile finishes the run
    that made the wish (building figures, sending them); starting at once slowed that
    run by as much as the computation itself.
    """

    def __init__(
        self,
        compute: Callable[[Hashable], object],
        max_entries: int = 512,
        delay: float = 0.0,
        compute_many: Callable[[Sequence[Hashable], Callable[[], bool]], list] | None = None,
        batch: int = 8,
        single: int = 2,
        on_done: Callable[[Hashable, float, int, Hashable], None] | None = None,
        lock: FairLock | None = None,
    ):
        self._compute = compute
        self._lock = lock
        self._compute_many = compute_many
        self._batch = max(1, batch) if compute_many is not None else 1
        self._single = single
        self._delay = delay
        self._wished_at = 0.0
        self._max_entries = max_entries
        self._done: OrderedDict = OrderedDict()
        self._queues: OrderedDict = OrderedDict()  # session -> [keys], in turn order
        self._served: Counter = Counter()  # keys taken from each session's current wish
        self._wished: dict = {}  # session -> when its current wish came
        self._on_done = on_done
        self._running: tuple = ()
        self._running_for: set = set()  # the sessions whose current wish includes the running batch
        self._cancel = False
        self._awaited: Counter = Counter()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0  # batches the worker finished (for tests and benchmarks)
        self.cancelled_batches = 0

    # ------------------------------------------------------------ the page's side
    def result(self, key: Hashable):
        """The value for key: kept, awaited if the worker is on it, else computed here (errors propagate)."""
        with self._cond:
            for queue in self._queues.values():
                if key in queue:
                    queue.remove(key)
            self._awaited[key] += 1
            try:
                # the worker may be queued behind other background work on the lock: a page waits on it now
                lifted = key in self._running and self._lock is not None and self._thread is not None
                with self._lock.expedite(self._thread.ident) if lifted else nullcontext():
                    self._cond.wait_for(lambda: key not in self._running)
            finally:
                self._awaited[key] -= 1
                if not self._awaited[key]:
                    del self._awaited[key]
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
        value = self._compute(key)
        with self._cond:
            self._keep(key, value)
        return value

    def peek(self, key: Hashable):
        """The kept value for key, or None (never computes)."""
        with self._cond:
            return self._done.get(key)

    def want(self, keys: Iterable[Hashable], session: Hashable = None) -> None:
        with self._cond:
            wanted = list(dict.fromkeys(keys))
            queue = [k for k in wanted if k not in self._done and k not in self._running]
            self._queues[session] = queue
            self._served[session] = 0
            self._wished_at = self._wished[session] = time.monotonic()
            if self._running:
                # a batch runs on while any session's current wish includes it (its keys are no
                # longer in that session's queue, so the queues alone cannot tell)
                if any(k in self._running for k in wanted):
                    self._running_for.add(session)
                else:
                    self._running_for.discard(session)
                if not self._running_for and not self._still_wanted(self._running):
                    self._cancel = True
            if self._closed:
                self._queues.clear()
            elif self._thread is None:
                self._thread = threading.Thread(target=self._work, name="steer-prefetch", daemon=True)
                self._thread.start()
                # a daemon thread killed inside a torch op at interpreter exit aborts the process
                atexit.register(self.close)
            self._cond.notify_all()

    def in_progress(self) -> tuple:
        """The keys the worker is computing now."""
        with self._cond:
            return self._running

    def pending(self, session: Hashable = None) -> int:
        """Keys of the session's wish not computed yet (queued or in progress)."""
        with self._cond:
            with_running = sum(1 for k in self._running if k not in self._done)
        return len([k for k in self._queues.get(session, ()) if k not in self._done]) + with_running

    def kept(self, keys: Iterable[Hashable]) -> dict:
        """The kept values among keys (key -> value), computing nothing."""
        with self._cond:
            return {k: self._done[k] for k in keys if k in self._done}

    def wait_for_more(self, keys: Sequence[Hashable], have: int, timeout: float) -> tuple[int, bool]:
        """Until more than `have` of keys are kept, or nothing more is coming for them, or timeout seconds
        pass: (how many are kept, whether more are still coming). The Steer page polls with it while its
        range is computed."""

        def count() -> int:
            return sum(1 for k in keys if k in self._done)

        def coming() -> bool:
            return any(k in self._running or any(k in q for q in self._queues.values()) for k in keys)

        with self._cond:
            self._cond.wait_for(lambda: count() > have or not coming(), timeout)
            return count(), coming()

    def close(self, timeout: float = 30.0) -> None:
        """Stop working ahead: drop the queues and wait for the job in progress (result() still works)."""
        with self._cond:
            self._closed = True
            self._queues.clear()
            self._cancel = bool(self._running)
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._running, timeout)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Until every queue is empty and nothing runs (for tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: not any(self._queues.values()) and not self._running, timeout)

    # ------------------------------------------------------------ the worker
    def _still_wanted(self, keys) -> bool:
        return any(k in self._awaited or any(k in q for q in self._queues.values()) for k in keys)

    def _cancelled(self) -> bool:
        return self._cancel

    def _next_batch(self):
        """(session, keys): the next session in turn with work, and its next batch; None when there is none."""
        for session in list(self._queues):
            queue = [k for k in self._queues[session] if k not in self._done]
            if not queue:  # this wish is done: forget the session
                del self._queues[session], self._served[session]
                self._wished.pop(session, None)
                continue
            self._queues[session] = queue
            size = 1 if self._served[session] < self._single else self._batch
            keys, self._queues[session] = tuple(queue[:size]), queue[size:]
            self._served[session] += len(keys)
            self._queues.move_to_end(session)  # the others go first next time
            return session, keys
        return None

    def _work(self):
        _local.background = True
        while True:
            with self._cond:
                self._cond.wait_for(lambda: any(self._queues.values()) or self._closed)
                if self._closed:
                    return
                wait = self._wished_at + self._delay - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue  # the queues may have changed meanwhile
                picked = self._next_batch()
                if picked is None:
                    continue
                session, keys = picked
                self._running, self._cancel, self._running_for = keys, False, {session}
            values, ok = None, False
            try:
                if len(keys) == 1:
                    values = [self._compute(keys[0])]
                else:
                    values = list(self._compute_many(keys, self._cancelled))
                ok = len(values) == len(keys)  # a batch that finished despite a cancel is still right
            except Exception:  # noqa: BLE001 - the foreground recomputes it and reports the error
                ok = False
            with self._cond:
                if ok:
                    for key, value in zip(keys, values):
                        self._keep(key, value)
                    self.batches += 1
                elif self._cancel:
                    self.cancelled_batches += 1
                self._running, self._cancel, self._running_for = (), False, set()
                finished = None
                if ok and session in self._queues and not [k for k in self._queues[session] if k not in self._done]:
                    finished = (
                        session,
                        time.monotonic() - self._wished.get(session, time.monotonic()),
                        self._served[session],
                        keys[-1],
                    )
                    del self._queues[session], self._served[session]
                    self._wished.pop(session, None)
                self._cond.notify_all()
            if finished is not None and self._on_done is not None:
                try:
                    self._on_done(*finished)
                except Exception:  # noqa: BLE001 - a report must not stop the worker
                    pass

    def _keep(self, key, value):
        self._done[key] = value
        self._done.move_to_end(key)
        while len(self._done) > self._max_entries:
            self._done.popitem(last=False)
