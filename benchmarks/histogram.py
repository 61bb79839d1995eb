"""What recording one latency costs: our Histogram against the ``hdrhistogram`` package.

Usage (ours only): ``.venv/bin/python benchmarks/histogram.py [--samples 1000000] [--repeat 3]``

With the peer, which is never a project dependency, from a throwaway venv::

    python3 -m venv /tmp/hdr-venv && /tmp/hdr-venv/bin/pip install hdrhistogram
    PYTHONPATH=src /tmp/hdr-venv/bin/python benchmarks/histogram.py

Workloads, all over the same log-normal latencies in seconds (median ~18 ms), each timed
as a plain loop of bound-method calls, best of ``--repeat``:

* ``ours`` — ``Histogram.record(v)``: sparse dict counts, exact integer sum.
* ``ours_dense`` — the same algorithm with a preallocated list of all 38,912 buckets
  (the storage we did not choose; here to show what the choice costs).
* ``hdrh_seconds`` — the package as we would have to use it: ``record_value(int(v * 1e9))``.
* ``hdrh_ints`` — the package on pre-converted integers (its own floor).

Then the memory each keeps for one such histogram, the percentile error of ours against
:func:`exact_percentile`, and what ``RequestStats.add`` costs per request (the per-record
aggregation work on the load path), and ``record_all``'s cost per value in batches of 32
into two histograms, with its bucket counts taken by ``Counter.update``'s C loop and by
the Python fallback. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence

from pyattacker.measure import (
    PERCENTILES,
    Attempt,
    Histogram,
    Outcome,
    RequestRecord,
    RequestStats,
    _histogram,
    exact_percentile,
    record_all,
)

try:
    from hdrh.histogram import HdrHistogram  # type: ignore[import-not-found]
except ImportError:  # the peer is optional: installed only in a throwaway venv
    HdrHistogram = None

N_BUCKETS = 38_912


class DenseHistogram:
    """Our record() with a dense list instead of a dict (the road not taken)."""

    __slots__ = ("count", "counts", "high", "low", "total")

    def __init__(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.count = self.total = 0
        self.low, self.high = float("inf"), float("-inf")

    def record(self, value: float) -> None:
        if not 0.0 <= value < 131072.0:
            raise ValueError(value)
        x = int(value * 1152921504606846976.0)
        u = x >> 30
        if u < 2048:
            i = u
        else:
            k = u.bit_length() - 11
            i = (k << 10) + (u >> k)
        self.counts[i] += 1
        self.count += 1
        self.total += x
        if value < self.low:
            self.low = value
        if value > self.high:
            self.high = value


def per_call_ns(record: Callable[[float], object], values: Sequence[float]) -> float:
    start = time.perf_counter()
    for value in values:
        record(value)
    return (time.perf_counter() - start) / len(values) * 1e9


def best(
    repeat: int, make: Callable[[], Callable[[float], object]], values: Sequence[float]
) -> float:
    return min(per_call_ns(make(), values) for _ in range(repeat))


def record_timings(values: list[float], repeat: int) -> dict[str, float]:
    timings = {
        "ours": best(repeat, lambda: Histogram().record, values),
        "ours_dense": best(repeat, lambda: DenseHistogram().record, values),
    }
    if HdrHistogram is not None:
        ints = [int(v * 1e9) for v in values]

        def hdrh_seconds() -> Callable[[float], object]:
            record_value = HdrHistogram(1, 2**47, 3).record_value
            return lambda v: record_value(int(v * 1e9))

        timings["hdrh_seconds"] = best(repeat, hdrh_seconds, values)
        timings["hdrh_ints"] = best(repeat, lambda: HdrHistogram(1, 2**47, 3).record_value, ints)
    return timings


def memory_lines(values: list[float]) -> list[str]:
    ours = Histogram()
    for value in values:
        ours.record(value)
    buckets = len(ours.to_dict()["buckets"])
    lines = [f"ours: {buckets} buckets touched, dict of {sys.getsizeof(ours._counts):,} bytes"]
    lines.append(f"ours_dense: list of {sys.getsizeof([0] * N_BUCKETS):,} bytes")
    if HdrHistogram is not None:
        peer = HdrHistogram(1, 2**47, 3)
        size = peer.counts_len * peer.get_word_size()
        lines.append(f"hdrh: counts array of {peer.counts_len:,} words = {size:,} bytes")
    return lines


def worst_error(values: list[float]) -> float:
    hist = Histogram()
    for value in values:
        hist.record(value)
    ordered = sorted(values)
    errors = []
    for q, got in hist.percentiles((0.0, *PERCENTILES, 100.0)).items():
        exact = exact_percentile(ordered, q)
        errors.append(abs(got - exact) / exact)
    return max(errors)


def stats_add_us(values: list[float], repeat: int) -> float:
    records = []
    for i, value in enumerate(values[:100_000]):
        at = float(i)
        attempt = Attempt(
            i, 1, at, acquired=at, sent=at + 1e-5, first_byte=at + value / 2, end=at + value,
            outcome=Outcome.OK, status=200, bytes_sent=120, bytes_received=300,
        )  # fmt: skip
        records.append(RequestRecord(i, (attempt,)))
    return min(per_call_ns(RequestStats().add, records) for _ in range(repeat)) / 1e3  # type: ignore[arg-type]


def batch_ns(values: list[float], repeat: int, in_c: bool) -> float:
    """ns per value of ``record_all`` over batches of 32 into two histograms (a batch's
    latencies go to the totals and their window), counting the bucket indexes with
    ``Counter.update``'s C loop (``in_c``) or with its Python fallback."""
    batches = [values[i : i + 32] for i in range(0, min(len(values), 320_000), 32)]
    counting = _histogram._count_elements
    _histogram._count_elements = counting if in_c else _histogram._count_in_python
    try:
        best_ns = float("inf")
        for _ in range(repeat):
            first, second = Histogram(), Histogram()
            start = time.perf_counter()
            for batch in batches:
                record_all(batch, first, second)
            best_ns = min(best_ns, (time.perf_counter() - start) / (32 * len(batches)) * 1e9)
        return best_ns
    finally:
        _histogram._count_elements = counting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    values = [rng.lognormvariate(-4, 1) for _ in range(args.samples)]
    print(f"{args.samples:,} log-normal latencies, best of {args.repeat}")
    timings = record_timings(values, args.repeat)
    for name, ns in timings.items():
        print(f"record_ns {name:<13} {ns:8.1f}")
    if HdrHistogram is None:
        print("hdrhistogram: not installed (see the module docstring to compare)")
    else:
        print(f"ratio ours/hdrh_seconds {timings['ours'] / timings['hdrh_seconds']:.2f}")
        print(f"ratio ours/hdrh_ints    {timings['ours'] / timings['hdrh_ints']:.2f}")
    print(f"ratio ours/ours_dense   {timings['ours'] / timings['ours_dense']:.2f}")
    for line in memory_lines(values):
        print(f"memory {line}")
    print(f"worst relative percentile error (p0..p100): {worst_error(values):.2e}")
    print(f"RequestStats.add_us {stats_add_us(values, args.repeat):.2f}")
    for in_c, name in ((True, "c_count"), (False, "py_count")):
        ns = batch_ns(values, args.repeat, in_c)
        print(f"record_all_ns {name:<9} {ns:8.1f}  (per value, batches of 32, two histograms)")


if __name__ == "__main__":
    main()
