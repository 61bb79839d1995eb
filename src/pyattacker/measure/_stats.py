"""The mergeable aggregate of request records: per endpoint, in total, or per window."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyattacker.measure._histogram import Histogram
from pyattacker.measure._records import ANSWERED, Attempt, Outcome, RequestRecord

if TYPE_CHECKING:
    from pyattacker.measure._batch import OkBatch

__all__ = ["RequestStats", "itl_gaps", "tpot_of"]

UTILISATION_HEADER = "azure-openai-deployment-utilization"
_NAMES = {outcome: outcome.value for outcome in Outcome}

# The LLM figures (see the class docstring). Stats written before they existed load with
# these empty, so every name here is optional in `from_dict`.
_LLM_TOTALS = ("prompt_tokens", "completion_tokens", "usage_requests", "failed_after_first_token")
_LLM_HISTOGRAMS = (
    "ttft",
    "ttft_scheduled",
    "itl",
    "tpot",
    "e2e",
    "e2e_scheduled",
    "utilisation",
    "retry_after",
)
_TOTALS = (
    "requests",
    "attempts",
    "sent_attempts",
    "throttled_requests",
    "throttled_attempts",
    "early_sends",
    "bytes_sent",
    "bytes_received",
    *_LLM_TOTALS,
)
# What is stored. Each answered request goes into exactly one of the latency pair and one
# of the service pair, so a one-attempt OK request costs four records, not six; the public
# `latency`, `service_time` and `attempt_service_time` are exact merges of these parts
# (Histogram.merge is exact), built when read. Records are the attack's hottest path.
_HISTOGRAMS = (
    "latency_ok",
    "_latency_not_ok",
    "_service_single",
    "_service_multi",
    "_attempt_service_multi",
    "dispatch_delay",
    "ttfb",
    *_LLM_HISTOGRAMS,
)
# Also `sent_attempts`, counted since after the LLM figures: an older dict loads it as 0.
_OPTIONAL = frozenset({*_LLM_TOTALS, *_LLM_HISTOGRAMS, "sent_attempts"})
# Counters and how to read their keys back from JSON (where every key is a string).
_COUNTERS: dict[str, Callable[[str], Any]] = {
    "by_outcome": str,
    "by_status": int,
    "by_error_class": str,
    "attempts_per_request": int,
}


# Every field, for __slots__ and __eq__ (compiled, a class has no __slots__ to read).
_STATE = (*_TOTALS, *_COUNTERS, *_HISTOGRAMS)


class RequestStats:
    """Counts and histograms of :class:`RequestRecord` s; merging equals adding them all.

    Which requests each histogram holds (reports must say which):

    * ``latency`` — scheduled clock (``end`` minus first ``scheduled``), every answered
      request: OK, FAILED *and* THROTTLED, because a refusal or an error is an answer the
      user waited for. ``latency_ok`` is the same for OK requests only.
    * ``service_time`` — sent clock (last ``end`` minus first ``sent``), answered requests.
    * ``ttfb`` — sent clock (last attempt's ``first_byte`` minus first ``sent``), answered.
    * ``dispatch_delay`` — ``sent - scheduled`` of every request that was sent, any outcome.
    * ``attempt_service_time`` — ``end - sent`` of every answered *attempt*, so the
      attempts of a retried request are visible one by one.

    ``attempts`` counts every attempt, ``sent_attempts`` those whose ``sent`` is set: what a
    server could have seen. The difference never left us (dropped, cancelled or failed
    before sending). DROPPED and CANCELLED requests have no latency; they are counted in
    ``by_outcome``.
    A span that comes out negative is recorded as 0 (the record keeps the raw value); a
    request sent before its scheduled time (a timer fired early) is counted in
    ``early_sends``. Request-level ``by_status`` and ``by_error_class`` are the last attempt's.

    LLM figures. A request *streamed* when it was answered and its last attempt carries a
    ``first_token`` (the first content chunk of a streamed answer); an *OK stream* is a
    streamed request that ended OK. An *OK answer* is an OK request whose last attempt is
    an LLM answer, streamed or whole body: it carries a ``first_token`` or a ``usage``. A
    stream that failed after its first token (cut short, malformed, an error event) has a
    TTFT (the token did arrive) but no figure of a whole answer: its end is where it broke.
    An HTTP request pays one ``is None`` check for all of them (on the hot path,
    :meth:`add_attempt`). With ``first`` = the last attempt's ``first_token`` and ``end``
    its ``end``:

    * ``ttft`` — every streamed request, sent clock: ``first`` minus the first ``sent`` (as
      ``service_time``). ``ttft_scheduled`` — the same requests, scheduled clock: ``first``
      minus the first ``scheduled``. Both span every attempt of a retried request; for one
      attempt they are that attempt's.
    * ``e2e`` / ``e2e_scheduled`` — ``end`` on the same two clocks, every OK answer (a
      whole-body answer has an end to end but no TTFT, ITL or TPOT).
    * ``itl`` — OK streams: every gap between consecutive content chunks of the last
      attempt: ``first`` to ``token_times[0]``, then between consecutive ``token_times``. A
      chunk carrying several tokens is one gap, so ITL is per chunk, not per token.
    * ``tpot`` — one value per OK stream: ``(end - first) / (n - 1)``, ``n`` the attempt's
      ``usage["completion_tokens"]`` when present, else its chunk count
      ``1 + len(token_times)``; not recorded when ``n < 2``.
    * ``failed_after_first_token`` — streamed requests that did not end OK (FAILED, or
      THROTTLED by an error inside the stream): ``ttft_scheduled.count`` minus the OK streams.
    * ``prompt_tokens``, ``completion_tokens`` — sums of the last attempt's ``usage`` over
      OK requests that carry one, streamed or not (whole numbers; a fraction is rounded, a negative
      or non-finite count ignored); ``usage_requests`` counts those requests.
    * ``utilisation`` — the ``azure-openai-deployment-utilization`` header (a percentage,
      recorded as a number of percent, e.g. ``12.5``) of every throttled attempt and of the
      streamed answer. A histogram for its percentiles; the unit is %, not seconds.
    * ``retry_after`` — the ``Retry-After`` (seconds) of every throttled attempt that
      carried one: how long the provider asked the client to wait.

    A whole-body LLM answer (no ``first_token``, a ``usage``) adds its end to end (if OK),
    tokens and utilisation: it has no token timestamps. A plain HTTP request pays two
    ``is None`` checks for all this.
    """

    __slots__ = _STATE

    def __init__(self) -> None:
        self.requests = 0
        self.attempts = 0
        self.sent_attempts = 0
        self.throttled_requests = 0
        self.throttled_attempts = 0
        self.early_sends = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.by_outcome: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()
        self.by_error_class: Counter[str] = Counter()
        self.attempts_per_request: Counter[int] = Counter()
        self.latency_ok = Histogram()
        self._latency_not_ok = Histogram()
        self._service_single = Histogram()  # one-attempt requests: also their attempt's
        self._service_multi = Histogram()
        self._attempt_service_multi = Histogram()  # each attempt of retried requests
        self.dispatch_delay = Histogram()
        self.ttfb = Histogram()
        self.prompt_tokens = self.completion_tokens = self.usage_requests = 0
        self.failed_after_first_token = 0
        self.ttft = Histogram()
        self.ttft_scheduled = Histogram()
        self.itl = Histogram()
        self.tpot = Histogram()
        self.e2e = Histogram()
        self.e2e_scheduled = Histogram()
        self.utilisation = Histogram()  # percent, not seconds
        self.retry_after = Histogram()

    @property
    def latency(self) -> Histogram:
        """Scheduled clock, every answered request (a new histogram on each read)."""
        return _union(self.latency_ok, self._latency_not_ok)

    @property
    def service_time(self) -> Histogram:
        """Sent clock, every answered request (a new histogram on each read)."""
        return _union(self._service_single, self._service_multi)

    @property
    def attempt_service_time(self) -> Histogram:
        """``end - sent`` of every answered attempt (a new histogram on each read)."""
        return _union(self._service_single, self._attempt_service_multi)

    @property
    def has_llm(self) -> bool:
        """Whether any request streamed, reported token usage, or carried a utilisation
        header."""
        return bool(self.ttft_scheduled.count or self.usage_requests or self.utilisation.count)

    def add(self, record: RequestRecord) -> None:
        """Count ``record`` and record its spans (see the class docstring for which).

        Reads the timestamps once instead of through ``RequestRecord``'s properties (this
        runs once per request on the load path); the tests check both agree.
        """
        attempts = record.attempts
        if len(attempts) == 1:
            self.add_attempt(attempts[0])
            return
        last = attempts[-1]
        outcome = last.outcome
        self.requests += 1
        self.attempts += len(attempts)
        self.attempts_per_request[len(attempts)] += 1
        self.by_outcome[str(outcome)] += 1
        if last.status is not None:
            self.by_status[last.status] += 1
        if last.error_class is not None:
            self.by_error_class[str(last.error_class)] += 1
        self._add_attempts(attempts)
        scheduled, sent = attempts[0].scheduled, record.sent
        if sent is not None:
            if sent < scheduled:
                self.early_sends += 1
            self.dispatch_delay.record(sent - scheduled if sent > scheduled else 0.0)
        end = last.end
        if end is not None and outcome in ANSWERED:
            self._add_answered(outcome, scheduled, sent, last.first_byte, end, self._service_multi)
            if last.first_token is not None:
                self._add_streamed(last, last.first_token, scheduled, sent, end)
            elif last.usage is not None:
                self._add_whole_body(last, scheduled, sent, end)

    def add_attempt(self, attempt: Attempt) -> None:
        """Add the request made of this one ``attempt``: exactly what ``add`` of its
        :class:`RequestRecord` does (the tests check both), without building the record.

        Nearly every request of an attack is one attempt; this is its hot path. The LLM
        figures cost a plain HTTP request two ``is None`` checks (a throttled one also has
        its headers read for the utilisation).
        """
        outcome = attempt.outcome
        self.requests += 1
        self.attempts += 1
        self.attempts_per_request[1] += 1
        self.by_outcome[_NAMES[outcome]] += 1  # not outcome.value: an enum property, slow
        status = attempt.status
        if status is not None:
            self.by_status[status] += 1
        if attempt.error_class is not None:
            self.by_error_class[str(attempt.error_class)] += 1
        self.bytes_sent += attempt.bytes_sent
        self.bytes_received += attempt.bytes_received
        if outcome is Outcome.THROTTLED:
            self.throttled_attempts += 1
            self.throttled_requests += 1
            self._note_throttle(attempt)
        scheduled, sent, end = attempt.scheduled, attempt.sent, attempt.end
        if sent is not None:
            self.sent_attempts += 1
            if sent < scheduled:
                self.early_sends += 1
            self.dispatch_delay.record(sent - scheduled if sent > scheduled else 0.0)
        if end is None or outcome not in ANSWERED:
            return
        self._add_answered(outcome, scheduled, sent, attempt.first_byte, end, self._service_single)
        if attempt.first_token is not None:  # the two LLM checks an HTTP request pays
            self._add_streamed(attempt, attempt.first_token, scheduled, sent, end)
        elif attempt.usage is not None:  # an LLM answer that did not stream
            self._add_whole_body(attempt, scheduled, sent, end)

    def add_ok_batch(self, batch: OkBatch) -> None:
        """Add the plain OK answers of ``batch``: what :meth:`add_attempt` of each does."""
        n = batch.count
        if not n:
            return  # a Counter keeps a key added 0 times: an empty batch must not add one
        self.requests += n
        self.attempts += n
        self.sent_attempts += n
        self.attempts_per_request[1] += n
        self.by_outcome[_NAMES[Outcome.OK]] += n
        self.by_status.update(batch.statuses)
        if batch.error_classes:
            self.by_error_class.update(batch.error_classes)
        self.early_sends += batch.early
        self.bytes_sent += batch.bytes_sent
        self.bytes_received += batch.bytes_received
        self.dispatch_delay.add_binned(batch.delays)
        self.latency_ok.add_binned(batch.latencies)
        self._service_single.add_binned(batch.services)
        self.ttfb.add_binned(batch.ttfbs)

    def add_dropped(self, count: int) -> None:
        """Add ``count`` requests dropped before sending, none with a status or error
        class: what ``add_attempt`` of ``count`` such attempts does, in one step (the
        arrivals an attack could not start before its schedule ended, in bulk)."""
        self.requests += count
        self.attempts += count
        self.attempts_per_request[1] += count
        self.by_outcome[Outcome.DROPPED.value] += count

    def _add_attempts(self, attempts: tuple[Attempt, ...]) -> None:
        throttled = sent_attempts = 0
        for attempt in attempts:
            self.bytes_sent += attempt.bytes_sent
            self.bytes_received += attempt.bytes_received
            if attempt.outcome is Outcome.THROTTLED:
                throttled += 1
                self._note_throttle(attempt)
            sent, end = attempt.sent, attempt.end
            if sent is not None:
                sent_attempts += 1
                if end is not None and attempt.outcome in ANSWERED:
                    self._attempt_service_multi.record(end - sent if end > sent else 0.0)
        self.sent_attempts += sent_attempts
        if throttled:
            self.throttled_attempts += throttled
            self.throttled_requests += 1

    def _add_answered(
        self, outcome: Outcome, scheduled: float, sent: float | None, first_byte: float | None,
        end: float, service: Histogram,
    ) -> None:  # fmt: skip
        latency = end - scheduled if end > scheduled else 0.0
        if outcome is Outcome.OK:
            self.latency_ok.record(latency)
        else:
            self._latency_not_ok.record(latency)
        if sent is not None:
            service.record(end - sent if end > sent else 0.0)
            if first_byte is not None:
                self.ttfb.record(first_byte - sent if first_byte > sent else 0.0)

    def _add_streamed(
        self, attempt: Attempt, first: float, scheduled: float, sent: float | None, end: float
    ) -> None:
        """The LLM figures of an answered request whose last attempt, ``attempt``, streamed
        (its first token at ``first``): TTFT whatever the outcome, the rest if it ended OK."""
        self.ttft_scheduled.record(first - scheduled if first > scheduled else 0.0)
        if sent is not None:
            self.ttft.record(first - sent if first > sent else 0.0)
        if attempt.outcome is Outcome.OK:
            self._add_ok_stream(attempt, first, scheduled, sent, end)
        else:
            self.failed_after_first_token += 1
        self._add_usage(attempt)

    def _add_whole_body(
        self, attempt: Attempt, scheduled: float, sent: float | None, end: float
    ) -> None:
        """The LLM figures of an answered request whose last attempt, ``attempt``, is a
        whole-body answer: its end to end if it ended OK, and its usage."""
        if attempt.outcome is Outcome.OK:
            self._add_e2e(scheduled, sent, end)
        self._add_usage(attempt)

    def _add_e2e(self, scheduled: float, sent: float | None, end: float) -> None:
        self.e2e_scheduled.record(end - scheduled if end > scheduled else 0.0)
        if sent is not None:
            self.e2e.record(end - sent if end > sent else 0.0)

    def _add_ok_stream(
        self, attempt: Attempt, first: float, scheduled: float, sent: float | None, end: float
    ) -> None:
        """End to end, ITL and TPOT of a stream that ended OK."""
        self._add_e2e(scheduled, sent, end)
        record = self.itl.record
        for gap in itl_gaps(first, attempt.token_times):
            record(gap)
        tpot = tpot_of(attempt, first, end)
        if tpot is not None:
            self.tpot.record(tpot)

    def _add_usage(self, attempt: Attempt) -> None:
        """The token counts of an answered request's last ``attempt`` (streamed or not)."""
        usage = attempt.usage
        if usage is not None and attempt.outcome is Outcome.OK:
            self.usage_requests += 1
            self.prompt_tokens += usage_tokens(usage, "prompt_tokens", 0)
            self.completion_tokens += usage_tokens(usage, "completion_tokens", 0)
        if attempt.outcome is not Outcome.THROTTLED:  # a throttled one was read already
            self._note_throttle(attempt)

    def _note_throttle(self, attempt: Attempt) -> None:
        percent = utilisation_of(attempt)
        if percent is not None:
            self.utilisation.record(percent)
        wait = attempt.retry_after
        if wait is not None and wait >= 0:
            self.retry_after.record(wait)

    def merge(self, other: RequestStats) -> None:
        """Add ``other``'s counts and samples: the result equals adding both sets of records."""
        for name in _TOTALS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in _COUNTERS:
            getattr(self, name).update(getattr(other, name))
        for name in _HISTOGRAMS:
            getattr(self, name).merge(getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (counter keys as strings) that :meth:`from_dict` restores exactly."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _TOTALS}
        for name in _COUNTERS:
            counter = getattr(self, name)
            data[name] = {str(key): counter[key] for key in sorted(counter)}
        for name in _HISTOGRAMS:
            data[name] = getattr(self, name).to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestStats:
        """The stats :meth:`to_dict` described (also after a JSON round trip).

        Raises ``ValueError`` on a missing field, a negative or non-integer count, or a
        bad histogram. The LLM fields and ``sent_attempts`` may be missing (stats written
        before they existed): they are then empty (``sent_attempts`` 0).
        """
        stats = cls()
        try:
            for name in _TOTALS:
                if name in data or name not in _OPTIONAL:
                    setattr(stats, name, _count(data[name]))
            for name, key_type in _COUNTERS.items():
                items = data[name].items()
                setattr(stats, name, Counter({key_type(k): _count(v) for k, v in items}))
            for name in _HISTOGRAMS:
                if name in data or name not in _OPTIONAL:
                    setattr(stats, name, Histogram.from_dict(data[name]))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"not request stats: {exc!r}") from exc
        return stats

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestStats):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _STATE)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        outcomes = ", ".join(f"{k}={v}" for k, v in sorted(self.by_outcome.items()))
        return f"RequestStats(requests={self.requests}, {outcomes or 'empty'}, {self.latency!r})"


def utilisation_of(attempt: Attempt) -> float | None:
    """The ``azure-openai-deployment-utilization`` header of ``attempt`` in percent
    (``"12.5%"`` gives 12.5); ``None`` when absent or not a finite percentage >= 0.
    ``Attempt.headers`` names are lower-case."""
    headers = attempt.headers
    if headers is None:
        return None
    value = headers.get(UTILISATION_HEADER)
    if value is None:
        return None
    try:
        percent = float(value.strip().removesuffix("%"))
    except (AttributeError, ValueError):
        return None
    return percent if 0.0 <= percent < Histogram.TOP else None


def usage_tokens(usage: Mapping[str, float], key: str, default: int) -> int:
    """``usage[key]`` as a whole number of tokens; ``default`` if absent or not a finite
    count >= 0 (a fraction rounds to the nearest whole number)."""
    value = usage.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if not 0 <= value < math.inf:
        return default
    return round(value)


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a count >= 0, got {value!r}")
    return value


def _union(a: Histogram, b: Histogram) -> Histogram:
    merged = a.copy()
    merged.merge(b)
    return merged


def itl_gaps(first: float, token_times: Sequence[float] | None) -> Iterator[float]:
    """The inter-token gaps of a stream whose first token came at ``first``: to the first
    of ``token_times``, then between consecutive ones (a gap read early counts as 0)."""
    previous = first
    for t in token_times or ():
        yield t - previous if t > previous else 0.0
        previous = t


def tpot_of(attempt: Attempt, first: float, end: float) -> float | None:
    """Time per output token of a stream that ended OK: ``(end - first) / (n - 1)``, ``n``
    its ``usage["completion_tokens"]`` if reported, else its chunk count; ``None`` when
    ``n < 2``."""
    chunks = 1 + len(attempt.token_times or ())
    usage = attempt.usage
    n = chunks if usage is None else usage_tokens(usage, "completion_tokens", chunks)
    return (end - first if end > first else 0.0) / (n - 1) if n >= 2 else None
