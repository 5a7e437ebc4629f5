"""Tasks with explicit dependencies, run on a pool of threads.

A job declares what it makes as :class:`Task` s, each naming the tasks whose results it
needs; :func:`run_tasks` starts a task once those have finished and hands it their results,
so nothing rests on the order in which work is submitted (the model is MRtrix3's
``Thread::run_queue``: one primitive runs the stages, each saying what it takes). The first task that
fails stops the run: no task starts after it, the running ones finish, and its exception
reaches the caller, which can see in ``results`` what was made before it.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["Task", "run_tasks"]


@dataclass(frozen=True)
class Task:
    """``run(*results of needs)``, called once every task named in ``needs`` has finished."""

    name: str
    run: Callable[..., object]
    needs: tuple[str, ...] = ()


def _check(tasks: Sequence[Task]) -> None:
    """A ValueError for a name given twice, an unknown need, or a cycle."""
    names = [task.name for task in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"task names must be unique: {names}")
    unknown = sorted({need for task in tasks for need in task.needs} - set(names))
    if unknown:
        raise ValueError(f"tasks need unknown tasks: {unknown}")
    done: set[str] = set()
    left = list(tasks)
    while left:
        ready = [task for task in left if set(task.needs) <= done]
        if not ready:
            raise ValueError(f"tasks depend on each other in a cycle: {sorted(task.name for task in left)}")
        done.update(task.name for task in ready)
        left = [task for task in left if task.name not in done]


def run_tasks(tasks: Sequence[Task], threads: int, results: dict[str, object] | None = None) -> dict[str, object]:
    """Run ``tasks`` on ``threads`` threads, each as soon as what it needs has finished.

    Parameters
    ----------
    tasks : sequence of Task
        Of the tasks ready at once, earlier ones start first (a long task listed early runs
        while short ones fill in around it).
    threads : int
        Most tasks running at once; with 1 they run one after the other, in ``tasks`` order
        where their needs allow.
    results : dict, optional
        Filled with each task's result, by name, as it finishes; pass one to know what was
        made when a task fails.

    Returns
    -------
    dict
        Every task's result, by name.

    Raises
    ------
    BaseException
        The first failed task's exception, once the tasks running beside it have finished;
        no task starts after a failure. ValueError, before any task runs, for duplicate
        names, unknown needs or a cycle.
    """
    _check(tasks)
    results = {} if results is None else results
    threads = max(1, threads)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="task") as pool:
        failure = _run(pool, threads, tasks, results)
    if failure is not None:
        raise failure
    return results


def _run(pool: ThreadPoolExecutor, threads: int, tasks: Sequence[Task],
         results: dict[str, object]) -> BaseException | None:
    """:func:`run_tasks`' loop; returns the first failure, if any, once nothing runs."""
    waiting = list(tasks)
    running: dict[Future, Task] = {}
    failure: BaseException | None = None
    while waiting or running:
        if failure is None:
            # No more than the pool's threads: a queued task could start after a failure.
            ready = [task for task in waiting if all(need in results for need in task.needs)]
            for task in ready[: threads - len(running)]:
                waiting.remove(task)
                running[pool.submit(task.run, *(results[need] for need in task.needs))] = task
        if not running:
            break
        finished, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in finished:
            task = running.pop(future)
            if future.cancelled():
                continue
            if future.exception() is not None:
                if failure is None:
                    failure = future.exception()
                continue
            results[task.name] = future.result()
    return failure
