import threading
import time

import pytest

from steering.lab.logic import U_MAX, U_STEP, neighbour_controls, worth_computing_ahead
from steering.lab.prefetch import Prefetcher
from steering.model.ode import SolverConfig


class Counting:
    def __init__(self, fail_on=()):
        self.calls, self.threads, self.fail_on = [], set(), set(fail_on)

    def __call__(self, key):
        self.calls.append(key)
        self.threads.add(threading.current_thread().name)
        if key in self.fail_on:
            raise ValueError(f"cannot do {key}")
        return key * 10


def test_wanted_keys_are_computed_in_the_background_once_and_then_served():
    compute = Counting()
    p = Prefetcher(compute)
    p.want([1, 2])
    assert p.wait_idle()
    assert compute.calls == [1, 2] and compute.threads == {"steer-prefetch"}
    assert p.result(2) == 20 and p.result(1) == 10
    assert compute.calls == [1, 2]  # served, not recomputed
    assert p.result(3) == 30  # not foreseen: computed by the caller
    assert compute.calls == [1, 2, 3] and threading.current_thread().name in compute.threads


def test_a_new_wish_replaces_the_queue_and_skips_what_is_kept():
    gate, started = threading.Event(), threading.Event()
    compute = Counting()
    p = Prefetcher(lambda k: (started.set(), gate.wait(5), compute(k))[2])
    p.want([1, 2, 3])  # the worker takes 1 and blocks on the gate
    assert started.wait(5)
    p.want([4, 1])  # 2 and 3 are dropped; 1 is in progress, so skipped
    gate.set()
    assert p.wait_idle()
    assert compute.calls == [1, 4]
    p.want([1, 4, 5])
    assert p.wait_idle()
    assert compute.calls == [1, 4, 5]


def test_a_failed_background_compute_is_redone_by_the_caller_with_its_error():
    compute = Counting(fail_on={7})
    p = Prefetcher(compute)
    p.want([7])
    assert p.wait_idle()
    with pytest.raises(ValueError, match="cannot do 7"):
        p.result(7)
    assert compute.calls == [7, 7]


def test_only_the_newest_values_are_kept():
    compute = Counting()
    p = Prefetcher(compute, max_entries=2)
    for k in (1, 2, 3):
        p.result(k)
    p.result(1)
    assert compute.calls == [1, 2, 3, 1]


def test_neighbour_controls_continue_the_last_move_first_and_stay_in_range():
    assert neighbour_controls((0.0, 0.0)) == [(U_STEP, 0.0), (-U_STEP, 0.0)]
    assert neighbour_controls((0.5, 0.0), previous=(0.55, 0.0)) == [(0.45, 0.0), (0.55, 0.0)]
    assert neighbour_controls((0.5, 0.2), previous=(0.5, 0.15)) == [(0.5, 0.25), (0.5, 0.15)]
    assert neighbour_controls((U_MAX, 0.0)) == [(U_MAX - U_STEP, 0.0)]


def test_the_worker_waits_for_a_quiet_moment_before_starting():
    started = []
    p = Prefetcher(lambda k: started.append(time.monotonic()), delay=0.2)
    wished = time.monotonic()
    p.want([1])
    time.sleep(0.1)
    assert started == []
    p.want([2])  # a newer wish restarts the wait
    assert p.wait_idle()
    assert len(started) == 1 and started[0] - wished >= 0.3 - 0.02


def test_only_cheap_fixed_step_solves_are_computed_ahead():
    assert worth_computing_ahead(SolverConfig("euler", steps=4))
    assert worth_computing_ahead(SolverConfig("rk4", steps=8))
    assert not worth_computing_ahead(SolverConfig("rk4", steps=64))
    assert not worth_computing_ahead(SolverConfig("dopri5", rtol=1e-3))


def test_close_waits_for_the_job_in_progress_and_stops_working_ahead():
    gate, started = threading.Event(), threading.Event()
    compute = Counting()
    p = Prefetcher(lambda k: (started.set(), gate.wait(5), compute(k))[2])
    p.want([1, 2])
    assert started.wait(5)
    closer = threading.Thread(target=p.close)
    closer.start()
    time.sleep(0.05)
    assert closer.is_alive()  # job 1 is still running
    gate.set()
    closer.join(5)
    assert not closer.is_alive() and compute.calls == [1]  # 2 was dropped
    p.want([3])
    assert p.wait_idle() and compute.calls == [1]
    assert p.result(3) == 30  # the caller still gets its value


# ---------------------------------------------------------------- the model lock and the range work-ahead
from steering.inference.sampling import Cancelled  # noqa: E402
from steering.lab.logic import range_controls, snap_u  # noqa: E402
from steering.lab.prefetch import FairLock  # noqa: E402


def test_fair_lock_serves_a_waiting_page_before_the_work_ahead_takes_it_back():
    lock, order = FairLock(), []
    held, go = threading.Event(), threading.Event()

    def worker():  # takes the lock again and again, as a worker looping over batches does
        for i in range(3):
            with _hold(lock, background=True):
                order.append(f"batch {i}")
                if i == 0:
                    held.set()
                    go.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    assert held.wait(5)
    page = threading.Thread(target=lambda: _acquire_and_note(lock, order, "page"))
    page.start()
    deadline = time.monotonic() + 5
    while lock.waiting() != (1, 0) and time.monotonic() < deadline:
        time.sleep(0.001)
    go.set()
    t.join(5), page.join(5)
    assert order == ["batch 0", "page", "batch 1", "batch 2"]


class _hold:
    def __init__(self, lock, background):
        self.lock, self.background = lock, background

    def __enter__(self):
        self.lock.acquire(background=self.background)

    def __exit__(self, *exc):
        self.lock.release()


def _acquire_and_note(lock, order, name):
    with lock:
        order.append(name)


def test_fair_lock_is_reentrant_and_refuses_a_foreign_release():
    lock = FairLock()
    with lock:
        with lock:
            assert lock.waiting() == (0, 0)
    with pytest.raises(RuntimeError):
        lock.release()


class Batches:
    """compute / compute_many over a shared FairLock, each batch holding it for `hold` seconds between polls."""

    def __init__(self, lock, hold=0.02):
        self.lock, self.hold = lock, hold
        self.single, self.batches, self.cancelled = [], [], []

    def compute(self, key):
        with self.lock:
            self.single.append(key)
            time.sleep(self.hold)
            return ("view", key)

    def compute_many(self, keys, cancelled):
        with self.lock:
            for _ in keys:  # between "tokens", as lab_ui's batches do
                self.lock.pause_for_foreground()
                if cancelled():
                    self.cancelled.append(tuple(keys))
                    raise Cancelled()
                time.sleep(self.hold)
            self.batches.append(tuple(keys))
            return [("view", k) for k in keys]


def test_the_range_goes_in_batches_nearest_first_and_reports_when_done():
    lock, done = FairLock(), []
    work = Batches(lock, hold=0.001)
    p = Prefetcher(
        work.compute,
        compute_many=work.compute_many,
        batch=3,
        single=2,
        on_done=lambda session, seconds, keys, last: done.append((session, keys, last)),
    )
    p.want(list(range(10)), session="a")
    assert p.wait_idle()
    assert work.single == [0, 1] and work.batches == [(2, 3, 4), (5, 6, 7), (8, 9)]
    assert p.result(7) == ("view", 7) and work.single == [0, 1]  # served from the range
    deadline = time.monotonic() + 5
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == [("a", 10, 9)] and p.pending("a") == 0


def test_a_changed_input_cancels_the_batch_in_progress():
    lock = FairLock()
    work = Batches(lock, hold=0.05)
    p = Prefetcher(work.compute, compute_many=work.compute_many, batch=4, single=0)
    p.want([("old", k) for k in range(8)], session="a")
    deadline = time.monotonic() + 5
    while not p.in_progress() and time.monotonic() < deadline:  # until the first batch is taken
        time.sleep(0.005)
    p.want([("new", k) for k in range(4)], session="a")  # the prompt changed
    assert p.wait_idle()
    assert work.cancelled == [tuple(("old", k) for k in range(4))] and p.cancelled_batches == 1
    assert work.batches == [tuple(("new", k) for k in range(4))]  # the old range was dropped, not finished
    assert p.peek(("old", 0)) is None and p.peek(("new", 3)) == ("view", ("new", 3))


def test_another_session_still_wanting_a_batch_keeps_it_running():
    lock = FairLock()
    work = Batches(lock, hold=0.03)
    p = Prefetcher(work.compute, compute_many=work.compute_many, batch=4, single=0)
    p.want(range(4), session="a")
    p.want(range(4), session="b")  # the same prompt in a second tab
    deadline = time.monotonic() + 5
    while not p.in_progress() and time.monotonic() < deadline:
        time.sleep(0.002)
    p.want([100], session="a")  # a moves on; b still wants 0..3
    assert p.wait_idle()
    assert work.cancelled == [] and (0, 1, 2, 3) in work.batches


def test_a_second_sessions_step_is_served_while_the_first_sessions_range_computes():
    lock = FairLock()
    work = Batches(lock, hold=0.02)  # a batch of 4 holds the model for ~80 ms
    p = Prefetcher(work.compute, compute_many=work.compute_many, batch=4, single=0)
    p.want([("a", k) for k in range(80)], session="a")  # ~1.6 s of work ahead
    deadline = time.monotonic() + 5
    while not work.batches and time.monotonic() < deadline:
        time.sleep(0.005)
    assert p.result(("b", 0)) == ("view", ("b", 0))  # the other session's step, not foreseen
    # served between two tokens of the batch in progress, not behind a's whole range
    assert p.pending("a") > 40 and len(work.batches) < 3
    p.close()


def test_sessions_take_turns_batch_by_batch():
    lock = FairLock()
    work = Batches(lock, hold=0.001)
    p = Prefetcher(work.compute, compute_many=work.compute_many, batch=2, single=0, delay=0.05)
    p.want([("a", k) for k in range(6)], session="a")
    p.want([("b", k) for k in range(6)], session="b")
    assert p.wait_idle()
    owners = [batch[0][0] for batch in work.batches]
    assert owners == ["a", "b", "a", "b", "a", "b"]


def test_range_controls_cover_the_slider_nearest_first():
    order = range_controls((0.5, -0.25))
    positions = [c[0] for c in order]
    assert len(order) == 80 and all(c[1] == -0.25 for c in order)  # 81 positions, the current one shown
    assert sorted(positions) == sorted(snap_u(-2 + 0.05 * k) for k in range(81) if k != 50)
    assert order[:4] == [(0.55, -0.25), (0.45, -0.25), (0.6, -0.25), (0.4, -0.25)]
    distances = [abs(p - 0.5) for p in positions]
    assert distances == sorted(distances, key=lambda d: round(d / 0.05))
    moving_down = range_controls((0.5, 0.0), previous=(0.55, 0.0))
    assert moving_down[:3] == [(0.45, 0.0), (0.55, 0.0), (0.4, 0.0)]
    after_style = range_controls((0.5, 0.2), previous=(0.5, 0.15))  # the style moved: its neighbours first
    assert after_style[:2] == [(0.5, 0.25), (0.5, 0.15)] and len(after_style) == 82


def test_a_batch_lets_a_waiting_page_in_between_two_tokens():
    lock, order = FairLock(), []
    started = threading.Event()

    def batch():
        with _hold(lock, background=True):
            with lock:  # reentrant: the pause keeps the depth held
                for token in range(4):
                    order.append(f"token {token}")
                    started.set()
                    time.sleep(0.03)
                    lock.pause_for_foreground()

    worker = threading.Thread(target=batch)
    worker.start()
    assert started.wait(5)
    _acquire_and_note(lock, order, "page")
    worker.join(5)
    assert order.index("page") < order.index("token 3")  # in the middle of the batch, not after it
    assert order.count("page") == 1 and len(order) == 5
    assert lock.waiting() == (0, 0) and not lock.pause_for_foreground()  # not held here: nothing to pause


def test_a_batch_started_for_one_session_runs_on_for_a_second_that_wanted_it_meanwhile():
    lock = FairLock()
    work = Batches(lock, hold=0.03)
    p = Prefetcher(work.compute, compute_many=work.compute_many, batch=4, single=0)
    p.want(range(4), session="a")
    deadline = time.monotonic() + 5
    while not p.in_progress() and time.monotonic() < deadline:  # a's batch is running
        time.sleep(0.002)
    p.want(range(4), session="b")  # b wants the same, already running: nothing queued for b
    p.want([100], session="a")  # a moves on; b still wants 0..3
    assert p.wait_idle()
    assert work.cancelled == [] and (0, 1, 2, 3) in work.batches
    p.want([200], session="b")  # with no one wanting a running batch, it is cancelled
    p.want(range(300, 304), session="b")
    assert p.wait_idle()


def test_a_page_awaiting_a_batch_lifts_it_ahead_of_a_long_background_job():
    """The regimes map (background, pausing only for pages) holds the model; the range's batch queues behind it; a page
    asks for a key of that batch. The page waits on the worker, not on the lock, so without the lift the batch (and the
    page) would wait for the whole map: the CI run of 2026-12-07 timed out after 180 s so."""
    lock = FairLock()
    work = Batches(lock, hold=0.001)
    job_holds, job_stop, job_log = threading.Event(), threading.Event(), []

    def background_job():  # holds the lock until told to stop (at most 20 s), pausing for pages between steps
        with _hold(lock, background=True):
            job_holds.set()
            deadline = time.monotonic() + 20
            while not job_stop.is_set() and time.monotonic() < deadline:
                if lock.pause_for_foreground():
                    job_log.append("paused")
                time.sleep(0.005)

    job = threading.Thread(target=background_job)
    job.start()
    try:
        assert job_holds.wait(5)
        p = Prefetcher(work.compute, compute_many=work.compute_many, batch=4, single=0, lock=lock)
        p.want(range(4), session="a")
        deadline = time.monotonic() + 5
        while lock.waiting() != (0, 1) and time.monotonic() < deadline:  # the batch waits behind the job
            time.sleep(0.002)
        assert p.in_progress() == (0, 1, 2, 3) and lock.waiting() == (0, 1)
        got = []
        page = threading.Thread(target=lambda: got.append(p.result(2)))
        page.start()
        page.join(10)
        assert got == [("view", 2)], "the page still waits: the batch stayed behind the background job"
        deadline = time.monotonic() + 5
        while not job_log and time.monotonic() < deadline:  # the job notes its pause once it has the lock back
            time.sleep(0.002)
        assert not job_stop.is_set() and job_log == ["paused"]  # the job let the batch in, then went on
        assert lock.waiting() == (0, 0)
    finally:
        job_stop.set()
        job.join(30)
    assert not job.is_alive()


def test_wait_for_more_returns_as_values_arrive_and_at_once_when_nothing_is_coming():
    gate = threading.Event()

    def compute(key):
        gate.wait(5)
        return key * 10

    p = Prefetcher(compute)
    keys = [1, 2, 3]
    assert p.wait_for_more(keys, have=0, timeout=5) == (0, False)  # nothing wanted: no wait
    p.want(keys, session="a")
    start = time.monotonic()
    assert p.wait_for_more(keys, have=0, timeout=0.2) == (0, True)  # wanted but blocked: the timeout
    assert time.monotonic() - start >= 0.15
    gate.set()
    got, _ = p.wait_for_more(keys, have=0, timeout=5)
    assert 1 <= got <= 3
    assert p.wait_idle(5)
    start = time.monotonic()
    assert p.wait_for_more(keys, have=3, timeout=5) == (3, False)  # all kept, nothing coming: no wait
    assert time.monotonic() - start < 1
    assert p.kept([3, 1, 7]) == {3: 30, 1: 10}
    p.close()
