"""The provider model: for an endpoint at time ``t``, refuse or admit, and with what outcome.

:class:`ProviderModel` is the decider (a pure core, see "The data flow of each job" in
``docs/architecture.md``), synchronous and free of I/O: ``admit`` returns a
:class:`Verdict` and changes only the model's own state (the request counter, the in-flight
count, the token bucket, the cache); ``finish`` ends a served request. A driver (the
benchmark's simulated provider, a mock server) does the waiting.

Objectivity, by construction:

- **The weather is a function of time.** ``capacity_at`` is arithmetic in ``t`` and
  ``storm_until`` a pure function of ``(seed, endpoint, t)``: a storm covers its whole time
  window, so it does not depend on when (or whether) anybody asked.
- **Common random numbers.** Request number ``n`` at an endpoint (counting refusals) uses
  draws ``[5n, 5n + 5)`` of the stream ``random.Random(f"{seed}:{endpoint}")``, all five
  drawn whatever the outcome. The dice of ordinal ``n`` are therefore fixed by
  ``(seed, endpoint, n)`` alone, and two algorithms that both reach ordinal ``n`` roll the
  same ones; what differs is the provider state their own traffic built (bucket, in-flight,
  cache). One seeded stream per endpoint instead of one ``Random`` per request gives the
  same guarantee without seeding a generator per request, which would dominate the cost.
- **It tells the client nothing** but what a vendor would: a 429 with ``Retry-After``, or an
  error shaped like a vendor SDK's (:class:`ProviderError` with a status, ``ConnectionError``,
  ``TimeoutError``), which ``pyattacker.errors.error_class_of`` classifies.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import NamedTuple

from pyattacker.world._profiles import EndpointProfile, Outage, RateLimitProfile
from pyattacker.world._scenario import Scenario

__all__ = ["DRAWS_PER_REQUEST", "ProviderError", "ProviderModel", "Verdict"]

#: uniforms consumed per request ordinal: latency body (2), tail, failure, failure kind.
DRAWS_PER_REQUEST = 5

_Draws = tuple[float, ...]


class ProviderError(Exception):
    """An error as a vendor SDK raises it: an HTTP status, a message, response headers."""

    def __init__(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {message}")
        self.status_code = status
        self.retry_after = retry_after
        self.headers: dict[str, str] = (
            {} if retry_after is None else {"retry-after": f"{retry_after:.3f}"}
        )

    def __reduce__(self) -> tuple[object, ...]:
        message = str(self).split(" ", 1)[1]
        return (_rebuild, (self.status_code, message, self.retry_after))


def _rebuild(status: int, message: str, retry_after: float | None) -> ProviderError:
    return ProviderError(status, message, retry_after=retry_after)


class Verdict(NamedTuple):
    """What the provider decided for one request.

    ``refused``: a 429 (``reason`` says why, ``seconds`` is the Retry-After). Otherwise the
    request takes ``seconds``, after which it fails with ``failure`` (``"upstream"``,
    ``"connection"`` or ``"timeout"``) or succeeds, costing ``cost`` tokens. ``served`` is
    False for a request an outage turned away (it used none of the endpoint's capacity).
    ``draws`` are the ordinal's uniforms (the common random numbers).
    """

    endpoint: str
    ordinal: int
    refused: bool
    seconds: float
    failure: str | None
    reason: str
    cost: float
    cache_hit: bool
    draws: tuple[float, ...]
    served: bool = True

    def error(self) -> BaseException | None:
        """The exception a client sees for this verdict, or ``None`` for a success."""
        if self.refused:
            return ProviderError(429, self.reason, retry_after=self.seconds)
        if self.failure is None:
            return None
        if self.failure == "connection":
            return ConnectionError(f"{self.endpoint}: {self.reason}")
        if self.failure == "timeout":
            return TimeoutError(f"{self.endpoint}: {self.reason}")
        return ProviderError(503, f"{self.endpoint}: {self.reason}")


class _Bucket:
    """A token bucket's live state; endpoints of one ``rate_group`` share one."""

    __slots__ = ("allowance", "limit", "stamp", "tokens")

    def __init__(self, limit: RateLimitProfile) -> None:
        self.limit = limit
        self.tokens = limit.burst
        self.allowance = 1.0
        self.stamp = 0.0


class _Endpoint:
    """The live state of one endpoint."""

    __slots__ = (
        "base",
        "bucket",
        "cache",
        "draw",
        "in_flight",
        "ordinal",
        "outages",
        "profile",
        "storms",
    )

    def __init__(
        self,
        profile: EndpointProfile,
        seed: int,
        outages: tuple[Outage, ...],
        bucket: _Bucket | None,
    ) -> None:
        self.profile = profile
        self.base = profile.capacity * profile.weight
        #: the outages that concern this endpoint
        self.outages = tuple(o for o in outages if not o.endpoints or profile.id in o.endpoints)
        self.draw = random.Random(f"{seed}:{profile.id}").random
        self.ordinal = 0
        self.in_flight = 0
        self.bucket = bucket
        self.cache: OrderedDict[object, float] = OrderedDict()
        self.storms: dict[int, bool] = {}


class ProviderModel:
    """The provider of one scenario and seed; see the module docstring for its rules."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        buckets: dict[str, _Bucket] = {}  # by rate_group: one bucket a group shares
        self._endpoints: dict[str, _Endpoint] = {}
        for e in scenario.endpoints:
            bucket = None
            if e.rate_limit is not None:
                if e.rate_group is None:
                    bucket = _Bucket(e.rate_limit)
                else:
                    bucket = buckets.setdefault(e.rate_group, _Bucket(e.rate_limit))
            self._endpoints[e.id] = _Endpoint(e, seed, scenario.outages, bucket)
        self._cycle = scenario.cycle

    # -- the weather: pure functions of time ---------------------------------------------

    def capacity_at(self, endpoint_id: str, t: float) -> int:
        """Requests ``endpoint_id`` holds in flight at ``t`` before refusing (0 when down)."""
        return self._capacity(self._endpoints[endpoint_id], t)

    def _capacity(self, state: _Endpoint, t: float) -> int:
        capacity = state.base * self._cycle.factor(t)
        if state.outages:
            endpoint = state.profile.id
            for outage in state.outages:
                if outage.covers(endpoint, t):
                    return 0
                capacity *= outage.warmup(endpoint, t)
        degradation = state.profile.degradation
        if degradation is not None:
            drop = 1.0 - degradation.capacity_factor
            capacity *= 1.0 - drop * degradation.progress(t)
        return max(1, round(capacity))

    def offered_seconds(self, t0: float, t1: float, step: float = 0.25) -> float:
        """Capacity the provider enforced between ``t0`` and ``t1``, in request-seconds:
        ``capacity_at`` (the integer limit, 0 while down) summed over every endpoint on a
        fixed grid of ``step`` seconds anchored at 0, each cell valued at its middle.

        A function of time only, like the weather: it does not depend on when anybody sent
        a request.
        """
        total = 0.0
        cell = int(t0 // step)
        while cell * step < t1:
            a, b = max(t0, cell * step), min(t1, (cell + 1) * step)
            if b > a:
                middle = (cell + 0.5) * step
                total += (b - a) * sum(self._capacity(s, middle) for s in self._endpoints.values())
            cell += 1
        return total

    def storm_until(self, endpoint_id: str, t: float) -> float | None:
        """When the storm over ``endpoint_id`` at ``t`` ends, or ``None`` if there is none.

        Time is cut into windows of ``storm_duration_s`` from 0; window ``w`` is a storm
        with probability ``storm_rate``, decided by ``Random(f"{seed}:{endpoint}:storm:{w}")``
        and lasting the whole window.
        """
        state = self._endpoints[endpoint_id]
        failures = state.profile.failures
        window = int(t // failures.storm_duration_s)
        stormy = state.storms.get(window)
        if stormy is None:
            roll = random.Random(f"{self.seed}:{endpoint_id}:storm:{window}").random()
            stormy = state.storms[window] = roll < failures.storm_rate
        return (window + 1) * failures.storm_duration_s if stormy else None

    # -- one request ----------------------------------------------------------------------

    def admit(self, endpoint_id: str, now: float, key: object = None) -> Verdict:
        """Decide request number ``ordinal`` at ``endpoint_id``, sent at ``now``.

        In order: an outage fails it fast (a connection error); a full endpoint or an empty
        token bucket refuses it (429; every refusal tightens the bucket); otherwise it is
        admitted, holds a unit of capacity until :meth:`finish`, and its draws decide its
        latency and whether it fails. ``key`` (the job, like a prompt prefix) is what a
        cache remembers.
        """
        state = self._endpoints[endpoint_id]
        draw = state.draw
        draws = (draw(), draw(), draw(), draw(), draw())  # DRAWS_PER_REQUEST, unrolled
        ordinal = state.ordinal
        state.ordinal = ordinal + 1
        if state.bucket is not None:
            self._refill(state, state.bucket, now)
        refusal = self._turned_away(state, endpoint_id, ordinal, now, draws)
        if refusal is not None:
            return refusal
        return self._served(state, endpoint_id, ordinal, now, key, draws)

    def _turned_away(
        self, state: _Endpoint, endpoint_id: str, ordinal: int, now: float, draws: _Draws
    ) -> Verdict | None:
        """The verdict of a request turned away before it holds any capacity, or ``None``
        when it may be served (it has then taken its token from the bucket)."""
        bucket = state.bucket
        capacity = self._capacity(state, now)
        if capacity == 0:  # down: an outage turns it away, using none of the capacity
            fail_after = next(o.fail_after_s for o in state.outages if o.covers(endpoint_id, now))
            reason = "connection refused (outage)"
            return Verdict(
                endpoint_id, ordinal, False, fail_after, "connection", reason, 0.0, False, draws,
                False,
            )  # fmt: skip
        if state.in_flight >= capacity:
            if bucket is not None:
                _tighten(bucket)
            wait = self.scenario.busy_retry_after_s
            return _refused(endpoint_id, ordinal, wait, "over capacity", draws)
        if bucket is not None:
            if bucket.tokens < 1.0:
                _tighten(bucket)
                return _refused(
                    endpoint_id, ordinal, _retry_after(bucket), "rate limit exceeded", draws
                )
            bucket.tokens -= 1.0
        return None

    def _served(
        self,
        state: _Endpoint,
        endpoint_id: str,
        ordinal: int,
        now: float,
        key: object,
        draws: _Draws,
    ) -> Verdict:
        """The verdict of an admitted request, which now holds a unit of capacity: its
        latency (shortened by a cache hit), its cost, and whether it fails."""
        profile = state.profile
        seconds = profile.latency.sample(draws[0], draws[1], draws[2])
        cost = self.scenario.tokens_per_call
        hit = False
        cache = profile.cache
        if cache is not None and key is not None:
            seen = state.cache.get(key)
            hit = seen is not None and now - seen <= cache.ttl_s
            if hit:
                seconds *= cache.hit_latency_factor
                cost *= cache.hit_cost_factor
        failure, reason, slower = self._failure(state, endpoint_id, now, draws)
        seconds *= slower
        if cache is not None and key is not None and failure is None:
            # only a request that was served leaves its key in the cache
            state.cache[key] = now
            state.cache.move_to_end(key)
            if len(state.cache) > cache.entries:
                state.cache.popitem(last=False)
        state.in_flight += 1
        return Verdict(endpoint_id, ordinal, False, seconds, failure, reason, cost, hit, draws)

    def _failure(
        self, state: _Endpoint, endpoint_id: str, now: float, draws: _Draws
    ) -> tuple[str | None, str, float]:
        """How an admitted request fails (``None`` and ``"ok"`` when it does not), and the
        factor on its latency: the error rate is the storm's during a storm, plus the
        degradation's share so far; draw 3 decides whether it fails, draw 4 how."""
        profile = state.profile
        error_rate = profile.failures.error_rate
        storm = self.storm_until(endpoint_id, now)
        if storm is not None:
            error_rate = profile.failures.storm_error_rate
        if profile.degradation is not None:
            error_rate += profile.degradation.error_rate * profile.degradation.progress(now)
        if draws[3] >= error_rate:
            return None, "ok", 1.0
        kind = draws[4]
        if kind < 0.5:
            failure, reason, slower = "upstream", "service unavailable", 1.0
        elif kind < 0.8:
            failure, reason, slower = "connection", "connection reset by peer", 1.0
        else:
            failure, reason, slower = "timeout", "read timed out", 2.0  # the slow way to fail
        if storm is not None:
            reason += " (storm)"
        return failure, reason, slower

    def finish(self, endpoint_id: str) -> None:
        """A served request (``verdict.served``) left ``endpoint_id``: its unit of capacity
        is free again. Refusals and requests an outage turned away never held one."""
        self._endpoints[endpoint_id].in_flight -= 1

    def requests_at(self, endpoint_id: str) -> int:
        """How many requests (ordinals) ``endpoint_id`` has decided so far."""
        return self._endpoints[endpoint_id].ordinal

    # -- the bucket -------------------------------------------------------------------------

    @staticmethod
    def _refill(state: _Endpoint, bucket: _Bucket, now: float) -> None:
        """Tokens and allowance regained since the bucket was last looked at; a bucket
        whose endpoint came back from an outage in between restarts empty."""
        elapsed = now - bucket.stamp
        if elapsed <= 0.0:
            return
        for outage in state.outages:
            ended = outage.last_end(state.profile.id, now)
            if ended is not None and ended > bucket.stamp:  # back from an outage: empty
                bucket.tokens = 0.0
                elapsed = min(elapsed, now - ended)
        bucket.stamp = now
        limit = bucket.limit
        if bucket.allowance < 1.0:
            recovered = limit.recovery_per_window * elapsed / limit.window_s
            bucket.allowance = min(1.0, bucket.allowance + recovered)
        bucket.tokens = min(limit.burst, bucket.tokens + elapsed * limit.rate * bucket.allowance)


def _refused(endpoint_id: str, ordinal: int, wait: float, reason: str, draws: _Draws) -> Verdict:
    """A 429 telling the client to come back after ``wait`` seconds."""
    return Verdict(endpoint_id, ordinal, True, wait, None, reason, 0.0, False, draws)


def _retry_after(bucket: _Bucket) -> float:
    """The limit's fixed Retry-After, else the time until the bucket holds a whole token."""
    wait = bucket.limit.retry_after_s
    if wait is None:
        wait = (1.0 - bucket.tokens) / (bucket.limit.rate * bucket.allowance)
    return wait


def _tighten(bucket: _Bucket) -> None:
    """A refusal: the allowance shrinks by ``tightening``, never below the floor."""
    limit = bucket.limit
    bucket.allowance = max(limit.tightening_floor, bucket.allowance * limit.tightening)
