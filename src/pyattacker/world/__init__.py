"""The world model: a provider described by its assumptions, and the decider that plays it.

The profiles (:class:`LoadCycle`, :class:`LatencyProfile`, :class:`FailureProfile`,
:class:`RateLimitProfile`, :class:`CacheProfile`, :class:`Degradation`, :class:`Outage`,
:class:`EndpointProfile`) and :class:`Scenario` say what the provider is like;
:class:`ProviderModel` decides, for an endpoint at time ``t``, whether a request is refused
(429 with Retry-After) or admitted, with what latency and outcome. The benchmark drives it
in virtual time; a mock server can drive the same model in real time. Stdlib only, no I/O.
"""

from pyattacker.world._profiles import (
    CacheProfile,
    Degradation,
    EndpointProfile,
    FailureProfile,
    LatencyProfile,
    LoadCycle,
    Outage,
    RateLimitProfile,
)
from pyattacker.world._provider import DRAWS_PER_REQUEST, ProviderError, ProviderModel, Verdict
from pyattacker.world._scenario import Scenario

__all__ = [
    "DRAWS_PER_REQUEST",
    "CacheProfile",
    "Degradation",
    "EndpointProfile",
    "FailureProfile",
    "LatencyProfile",
    "LoadCycle",
    "Outage",
    "ProviderError",
    "ProviderModel",
    "RateLimitProfile",
    "Scenario",
    "Verdict",
]
