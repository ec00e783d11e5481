import threading
import time

import pytest

from steering.lab import U_MAX, U_STEP, neighbour_controls, worth_computing_ahead
from steering.ode import SolverConfig
from steering.prefetch import Prefetcher


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
    assert compute.calls == [1, 2]          # served, not recomputed
    assert p.result(3) == 30                # not foreseen: computed by the caller
    assert compute.calls == [1, 2, 3] and threading.current_thread().name in compute.threads


def test_a_new_wish_replaces_the_queue_and_skips_what_is_kept():
    gate, started = threading.Event(), threading.Event()
    compute = Counting()
    p = Prefetcher(lambda k: (started.set(), gate.wait(5), compute(k))[2])
    p.want([1, 2, 3])                       # the worker takes 1 and blocks on the gate
    assert started.wait(5)
    p.want([4, 1])                          # 2 and 3 are dropped; 1 is in progress, so skipped
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
    p.want([2])                              # a newer wish restarts the wait
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
    assert closer.is_alive()                 # job 1 is still running
    gate.set()
    closer.join(5)
    assert not closer.is_alive() and compute.calls == [1]      # 2 was dropped
    p.want([3])
    assert p.wait_idle() and compute.calls == [1]
    assert p.result(3) == 30                 # the caller still gets its value
