"""``Runner.run`` from synchronous code (``pyattacker.run._blocking``)."""

from __future__ import annotations

from pyattacker.run import Runner, pipeline, task

SEEN: list[BaseException | None] = []


@task
def look(x: int) -> int:
    try:
        raise ValueError(x)
    except ValueError as exc:
        SEEN.append(exc.__context__)
    return x


def test_a_blocking_run_does_not_execute_inside_the_except_that_found_no_loop() -> None:
    # An exception raised in a task must not carry the RuntimeError of the event-loop
    # probe as its context: httptools' callers tell their own stop signal by it.
    SEEN.clear()
    with Runner(":memory:", handle_signals=False) as runner:
        assert runner.run(pipeline("look", look).map([1])).by_state == {"succeeded": 1}
    assert SEEN == [None]
