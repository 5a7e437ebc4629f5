"""The task scheduler: each task after what it needs, whatever the order given; a failure
stops what depends on it and reaches the caller."""

from __future__ import annotations

import threading

import pytest

from worker.pipeline import Task, run_tasks


def recorder():
    """A log of task names as they start and finish, and a task maker that appends to it."""
    log: list[str] = []
    lock = threading.Lock()

    def task(name, value=None, needs=(), gate: threading.Event | None = None, error: BaseException | None = None):
        def run(*given):
            with lock:
                log.append(f"start {name}")
            if gate is not None:
                assert gate.wait(10)
            if error is not None:
                raise error
            with lock:
                log.append(f"end {name}")
            return (name, value, given)

        return Task(name, run, tuple(needs))

    return log, task


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_each_task_gets_what_it_needs_after_it_finished(threads):
    log, task = recorder()
    # listed before what they need: the order given is no dependency order
    tasks = [task("sum", needs=("a", "b")), task("b", 2, needs=("a",)), task("a", 1), task("c", 3)]
    results = run_tasks(tasks, threads)
    assert results["a"] == ("a", 1, ())
    assert results["b"] == ("b", 2, (("a", 1, ()),))
    assert results["sum"] == ("sum", None, (results["a"], results["b"]))
    assert results["c"] == ("c", 3, ())
    assert log.index("end a") < log.index("start b") and log.index("end b") < log.index("start sum")
    if threads == 1:  # one thread: of the tasks ready, the one listed first
        assert log == ["start a", "end a", "start b", "end b", "start sum", "end sum", "start c", "end c"]


def test_a_failure_cancels_what_has_not_started_and_propagates():
    log, task = recorder()
    release = threading.Event()
    tasks = [task("slow", gate=release), task("broken", error=KeyError("no such thing")),
             task("after", needs=("broken",)), task("queued"), task("unrelated", needs=("slow",))]

    def fail_then_release():
        # "slow" keeps running while "broken" fails; it must finish, and nothing new start
        results: dict = {}
        threading.Timer(0.2, release.set).start()
        with pytest.raises(KeyError, match="no such thing"):
            run_tasks(tasks, 2, results)
        return results

    results = fail_then_release()
    assert "start after" not in log and "start unrelated" not in log and "start queued" not in log
    assert "end slow" in log and set(results) == {"slow"}


def test_a_failure_on_one_thread_stops_the_tasks_after_it():
    log, task = recorder()
    tasks = [task("first", 1), task("broken", error=OSError("disk full")), task("second", 2)]
    results: dict = {}
    with pytest.raises(OSError, match="disk full"):
        run_tasks(tasks, 1, results)
    assert log == ["start first", "end first", "start broken"]
    assert results == {"first": ("first", 1, ())}


def test_the_first_failure_is_the_one_raised_and_the_others_still_finish():
    log, task = recorder()
    second = threading.Event()
    tasks = [task("first", error=ValueError("first")), task("second", gate=second, error=RuntimeError("second"))]
    threading.Timer(0.2, second.set).start()
    with pytest.raises(ValueError, match="first"):
        run_tasks(tasks, 2)
    assert sorted(log) == ["start first", "start second"]
    assert second.is_set()  # run_tasks returned only after the running task had finished


@pytest.mark.parametrize("tasks, message", [
    ([Task("a", int), Task("a", int)], "unique"),
    ([Task("a", int, ("b",))], "unknown tasks: \\['b'\\]"),
    ([Task("a", int, ("b",)), Task("b", int, ("a",)), Task("c", int)], "cycle: \\['a', 'b'\\]"),
])
def test_bad_declarations_are_refused_before_anything_runs(tasks, message):
    with pytest.raises(ValueError, match=message):
        run_tasks(tasks, 2)


def test_no_tasks_give_no_results():
    assert run_tasks([], 4) == {}
