"""The live progress line's figures: rate over a recent window, ETA, steps reused."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from pyattacker.cli._run_progress import RATE_WINDOW_S, RunProgress, pace, steps_line


def _stats(elapsed_s: float, succeeded: int, *, skipped: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "elapsed_s": elapsed_s,
        "in_flight": 2,
        "pipelines": {
            "ended": {"succeeded": succeeded},
            "skipped": skipped,
            "parked": 0,
            "duplicates": 0,
        },
        "attempts": {"total": succeeded, "retries": 0, "by_error_class": {}},
        **extra,
    }


def test_the_rate_is_measured_over_the_recent_window_not_since_the_start() -> None:
    # slow for 100 s (1/s), then fast for the last 10 s (10/s)
    samples = [(float(t), t) for t in range(101)]
    samples += [(100.0 + t, 100 + 10 * t) for t in range(1, 11)]
    rate, eta = pace(samples, remaining=400)
    assert rate == 10.0
    assert eta == 40.0


def test_the_eta_is_unknown_until_two_samples_and_while_nothing_ends() -> None:
    assert pace([], remaining=10) == (None, None)
    assert pace([(1.0, 0)], remaining=10) == (None, None)
    assert pace([(1.0, 0), (1.0, 0)], remaining=10) == (None, None)
    assert pace([(0.0, 3), (5.0, 3)], remaining=10) == (0.0, None)


def test_nothing_remaining_means_an_eta_of_zero() -> None:
    assert pace([(0.0, 0), (2.0, 10)], remaining=0) == (5.0, 0.0)
    assert pace([], remaining=0) == (None, 0.0)


def test_one_sample_in_the_window_still_spans_an_interval_back_to_the_one_before() -> None:
    assert pace([(0.0, 0), (30.0, 60)], remaining=60) == (2.0, 30.0)


@given(
    st.lists(
        st.tuples(st.integers(0, 5000).map(lambda ms: ms / 100), st.integers(0, 20)),
        min_size=2,
        max_size=40,
    ).map(lambda steps: _cumulative(steps)),
    st.integers(0, 10_000),
)
def test_the_rate_is_never_negative_and_the_eta_agrees_with_it(
    samples: list[tuple[float, int]], remaining: int
) -> None:
    rate, eta = pace(samples, remaining=remaining)
    if rate is not None:
        assert rate >= 0
        if remaining and rate > 0:
            assert eta is not None
            assert abs(eta * rate - remaining) <= 1e-6 * remaining
    if remaining == 0:
        assert eta == 0.0


def _cumulative(steps: list[tuple[float, int]]) -> list[tuple[float, int]]:
    t, n, out = 0.0, 0, []
    for dt, dn in steps:
        t, n = t + dt, n + dn
        out.append((t, n))
    return out


def _pictures(*snapshots: dict[str, Any], total: int) -> str:
    """The progress line after rendering ``snapshots`` in turn (the last one, as text)."""
    current = list(snapshots[:1])
    progress = RunProgress(Console(file=io.StringIO()), lambda: current[0], total=total, label="r")
    for snapshot in snapshots[:-1]:
        current[0] = snapshot
        progress.render()
    current[0] = snapshots[-1]
    out = io.StringIO()
    Console(file=out, width=140, color_system=None).print(progress.render())
    return out.getvalue()


def test_the_progress_line_shows_the_rate_and_the_eta() -> None:
    text = _pictures(_stats(0.0, 0), _stats(RATE_WINDOW_S / 2, 20), total=100)
    assert "4.0/s" in text
    assert "ETA 20s" in text


def test_skipped_items_count_as_done_but_not_in_the_rate() -> None:
    text = _pictures(_stats(0.0, 0, skipped=50), _stats(10.0, 10, skipped=50), total=100)
    assert "60/100 pipelines" in text
    assert "1.0/s  ETA 40s" in text


def test_steps_reused_show_when_the_run_counts_them() -> None:
    assert steps_line(_stats(1.0, 0)) is None
    assert steps_line(_stats(1.0, 0, steps={"reused": 40, "ran": 12})) == "40 steps reused, 12 ran"
    stats = _stats(1.0, 3, steps={"reused": 40, "ran": 12})
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(
        RunProgress(Console(file=io.StringIO()), lambda: stats, total=10, label="run").render()
    )
    assert "40 steps reused" in out.getvalue()


def test_the_rate_and_the_eta_fit_on_an_80_column_terminal() -> None:
    for width in (80, 60):
        current = [_stats(0.0, 0)]
        progress = RunProgress(
            Console(file=io.StringIO()), lambda now=current: now[0], total=20_000, label="run"
        )
        progress.render()
        current[0] = _stats(12.5, 2_500)
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(progress.render())
        assert "2500/20000 pipelines  12.5 s  200.0/s  ETA 1m28s" in out.getvalue(), width


def test_an_estimated_total_that_falls_short_never_shows_more_done_than_total() -> None:
    text = _pictures(_stats(0.0, 0), _stats(10.0, 110), total=100)  # one shard's estimate
    assert "110/110 pipelines" in text


def test_one_shards_bar_counts_to_its_share_of_the_rows_ahead() -> None:
    from pyattacker.cli._run_input import pipelines_to_run

    class Source:
        rows_total, limit, first_row = 1000, None, 0

    class Store:
        def count_pipelines(self) -> int:
            return 10

    class FakeRunner:
        store = Store()

    runner: Any = FakeRunner()
    assert pipelines_to_run(Source(), 2, runner) == 2010  # type: ignore[arg-type]
    assert pipelines_to_run(Source(), 2, runner, 4) == 510  # type: ignore[arg-type]
