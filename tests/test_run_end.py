"""How a run's end is named: ``end_of_run``, the pure decision behind ``RunReport.state``."""

from __future__ import annotations

from pyattacker.errors import StoreError
from pyattacker.run._stats import RunCounters, end_of_run
from pyattacker.store import RunState


def _end(
    *,
    stop_reason: str | None = None,
    input_error: BaseException | None = None,
    store_failure: BaseException | None = None,
    input_finished: bool = True,
    failed: int = 0,
) -> tuple[RunState, str | None]:
    counters = RunCounters()
    counters.admitted = 3
    counters.pipelines["failed"] = failed
    return end_of_run(
        stop_reason=stop_reason,
        input_error=input_error,
        store_failure=store_failure,
        input_finished=input_finished,
        counters=counters,
    )


def test_a_run_that_read_everything_and_failed_nothing_succeeded() -> None:
    assert _end() == (RunState.SUCCEEDED, None)


def test_a_failed_pipeline_fails_the_run() -> None:
    assert _end(failed=1) == (RunState.FAILED, None)


def test_a_run_over_part_of_its_input_is_incomplete_even_with_failures() -> None:
    assert _end(input_finished=False, failed=1) == (RunState.INCOMPLETE, None)


def test_a_stop_interrupts_the_run_and_its_reason_wins() -> None:
    stopped = _end(stop_reason="SIGINT received", input_error=ValueError("x"), failed=2)
    assert stopped == (RunState.INTERRUPTED, "SIGINT received")


def test_a_failing_input_or_store_interrupts_the_run_and_says_which() -> None:
    assert _end(input_error=ValueError("bad row")) == (
        RunState.INTERRUPTED,
        "the input failed after 3 pipelines",
    )
    assert _end(store_failure=StoreError("disk full")) == (
        RunState.INTERRUPTED,
        "the store failed: disk full",
    )
