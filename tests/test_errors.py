"""Error classification (`error_class_of`) and the server's wait (`retry_after_of`)."""

from __future__ import annotations

import asyncio
import datetime
import errno
import math
import socket
from collections.abc import Callable
from email.message import Message
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock, Mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker import errors
from pyattacker.errors import (
    AcquireTimeout,
    ConfigError,
    ErrorClass,
    FatalError,
    IllegalTransition,
    LeaseLeakError,
    NoUsableResource,
    PoolNotFound,
    ResourceUnavailable,
    ResponseTooLarge,
    RetryableError,
    SimulationStalled,
    error_class_of,
    retry_after_of,
)


class StatusError(Exception):
    """A vendor-style error that carries an HTTP status the way SDKs do."""

    def __init__(self, **attributes: Any) -> None:
        super().__init__("vendor error")
        for name, value in attributes.items():
            setattr(self, name, value)


def _raises(*_args: object) -> Any:
    raise RuntimeError("this property explodes")


# ---------------------------------------------------------------------------- the exports


def test_errors_exports_exactly_the_public_names() -> None:
    assert set(errors.__all__) == {
        "AcquireTimeout",
        "CodecError",
        "ConfigError",
        "ConnectError",
        "ErrorClass",
        "FatalError",
        "HttpError",
        "HttpStatusError",
        "IllegalTransition",
        "LeaseLeakError",
        "NoUsableResource",
        "PoolNotFound",
        "PyAttackerError",
        "RedirectError",
        "RemoteProtocolError",
        "RequestTimeout",
        "ResourceError",
        "ResponseTooLarge",
        "ResourceUnavailable",
        "RetryableError",
        "SimulationError",
        "SimulationStalled",
        "StoreError",
        "TlsError",
        "WallBudgetExceeded",
        "error_class_of",
        "retry_after_of",
    }
    assert all(hasattr(errors, name) for name in errors.__all__)


def test_exactly_five_classes_are_retried_by_default() -> None:
    retried = {c for c in ErrorClass if c.retried_by_default}
    assert retried == {"retryable", "rate_limit", "timeout", "connection", "upstream"}


# ----------------------------------------------------------------------- error_class_of


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (asyncio.CancelledError(), "cancelled"),
        (KeyboardInterrupt(), "cancelled"),
        (SystemExit(1), "cancelled"),
        (GeneratorExit(), "cancelled"),
        (FatalError("stop"), "fatal"),
        (RetryableError("again"), "retryable"),
        (AcquireTimeout("no lease", timeout_s=1.0), "timeout"),
        (ConfigError("bad", field="x"), "invalid"),
        (PoolNotFound("p"), "invalid"),
        (IllegalTransition("no"), "invalid"),
        (LeaseLeakError("leak"), "invalid"),
        (NoUsableResource("all dead", pool="p"), "no_usable_resource"),
        (ResponseTooLarge("head over 64 KiB", what="head", limit=65536), "protocol"),
        (SimulationStalled("stuck"), "fatal"),
        (TimeoutError(), "timeout"),  # also asyncio.TimeoutError and socket.timeout
        (ConnectionError(), "connection"),
        (ConnectionRefusedError(), "connection"),
        (ConnectionResetError(), "connection"),
        (ConnectionAbortedError(), "connection"),
        (BrokenPipeError(), "connection"),
        (OSError(errno.ECONNREFUSED, "refused"), "connection"),
        (OSError(errno.ETIMEDOUT, "timed out"), "timeout"),
        (OSError(errno.ENOENT, "no such file"), "unknown"),
        (socket.gaierror(socket.EAI_AGAIN, "try again"), "connection"),
        (socket.gaierror(socket.EAI_NONAME, "no such host"), "unknown"),
        (TypeError(), "invalid"),
        (ValueError(), "invalid"),
        (KeyError("k"), "invalid"),
        (IndexError(), "invalid"),
        (AttributeError(), "invalid"),
        (NotImplementedError(), "invalid"),
        (AssertionError(), "invalid"),
        (ZeroDivisionError(), "invalid"),
        (RuntimeError(), "unknown"),
        (ResourceUnavailable("empty"), "unknown"),
        (Exception(), "unknown"),
        (None, "unknown"),
        ("not an exception", "unknown"),
        (TimeoutError, "unknown"),  # a class, not an instance
    ],
)
def test_each_kind_of_error_gets_its_class(exc: object, expected: str) -> None:
    assert error_class_of(exc) == expected


def _expected_class_of_status(status: int) -> str | None:
    """The status table, written out independently of the implementation."""
    table = {
        408: "timeout",
        504: "timeout",
        425: "rate_limit",
        429: "rate_limit",
        **dict.fromkeys(
            [400, 401, 402, 403, 404, 405, 406, 410, 411, 413, 414, 415, 422, 431, 451], "fatal"
        ),
    }
    if status in table:
        return table[status]
    return "upstream" if 500 <= status <= 599 else None


def test_every_http_status_maps_as_documented() -> None:
    for status in range(100, 600):
        expected = _expected_class_of_status(status) or "unknown"
        assert error_class_of(StatusError(status_code=status)) == expected, status
        # A status that says nothing leaves the type to decide.
        expected_for_value_error = _expected_class_of_status(status) or "invalid"
        assert error_class_of(_value_error_with_status(status)) == expected_for_value_error


def _value_error_with_status(status: int) -> ValueError:
    exc = ValueError("bad response")
    exc.status = status  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    "make",
    [
        lambda: StatusError(status=429),
        lambda: StatusError(status_code=429),
        lambda: StatusError(http_status=429),
        lambda: StatusError(status="429"),
        lambda: StatusError(status=" 429 "),
        lambda: StatusError(response=SimpleNamespace(status_code=429)),
        lambda: StatusError(response=SimpleNamespace(status=429)),
        lambda: StatusError(status="OK", status_code=429),  # first *usable* value wins
        lambda: StatusError(status=Mock(), response=SimpleNamespace(status_code=429)),
    ],
)
def test_the_status_is_read_from_where_sdks_put_it(make: Callable[[], Exception]) -> None:
    assert error_class_of(make()) == "rate_limit"


@pytest.mark.parametrize(
    "status", [True, 429.0, "429.0", "4290", "", "abc", 99, 600, -429, "٤٢٩", Mock(), None]
)
def test_values_that_are_not_statuses_are_ignored(status: object) -> None:
    assert error_class_of(StatusError(status=status)) == "unknown"


def test_the_first_status_attribute_wins_over_the_response() -> None:
    exc = StatusError(status_code=503, response=SimpleNamespace(status_code=429))
    assert error_class_of(exc) == "upstream"


def test_an_explicit_error_class_attribute_wins_over_type_and_status() -> None:
    assert error_class_of(StatusError(error_class="rate_limit", status=400)) == "rate_limit"
    assert error_class_of(StatusError(error_class=ErrorClass.UPSTREAM)) == "upstream"

    class Declared(ValueError):
        error_class = "timeout"

    assert error_class_of(Declared()) == "timeout"


@pytest.mark.parametrize("value", ["nonsense", "", 3, None, ["timeout"], Mock()])
def test_an_invalid_error_class_attribute_is_ignored(value: object) -> None:
    assert error_class_of(StatusError(error_class=value, status=503)) == "upstream"


def test_cancellation_cannot_be_declared_into_something_else() -> None:
    class Sneaky(asyncio.CancelledError):
        error_class = "retryable"

    assert error_class_of(Sneaky()) == "cancelled"


def test_a_fatal_error_stays_fatal_whatever_it_declares() -> None:
    class Confused(FatalError):
        error_class = "retryable"

    assert error_class_of(Confused("no")) == "fatal"


def test_a_retryable_error_with_a_garbage_class_is_still_retryable() -> None:
    class Garbled(RetryableError):
        error_class = "garbage"

    assert error_class_of(Garbled("again")) == "retryable"


def test_a_timeout_is_a_timeout_even_with_a_status() -> None:
    exc = TimeoutError("read timed out")
    exc.status = 400  # type: ignore[attr-defined]
    assert error_class_of(exc) == "timeout"


def test_a_wrapped_error_is_classified_by_its_cause() -> None:
    outer = RuntimeError("request failed")
    outer.__cause__ = ConnectionResetError("reset by peer")  # what `raise ... from` sets
    assert error_class_of(outer) == "connection"


def test_an_implicit_context_is_not_a_cause() -> None:
    outer = RuntimeError("while handling")
    outer.__context__ = ConnectionResetError("reset by peer")  # what a bare `raise` sets
    assert error_class_of(outer) == "unknown"


def test_the_outer_error_wins_over_its_cause() -> None:
    outer = KeyError("missing field")
    outer.__cause__ = ConnectionResetError("reset by peer")
    assert error_class_of(outer) == "invalid"


def test_a_cycle_of_causes_ends_in_unknown() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert error_class_of(first) == "unknown"


def test_an_exploding_object_is_unknown_not_an_exception() -> None:
    class Exploding(Exception):
        status = property(_raises)
        error_class = property(_raises)
        response = property(_raises)

        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    assert error_class_of(Exploding()) == "unknown"


def test_a_mock_response_is_not_mistaken_for_a_status() -> None:
    assert error_class_of(StatusError(response=Mock())) == "unknown"
    assert error_class_of(StatusError(response=MagicMock())) == "unknown"
    assert error_class_of(MagicMock()) == "unknown"


_ATTRIBUTE_NAMES = st.sampled_from(
    ["status", "status_code", "http_status", "error_class", "response", "errno", "headers"]
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.sampled_from([*ErrorClass, Mock(), MagicMock(), property(_raises)]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2),
        st.dictionaries(st.text(max_size=3), inner, max_size=2),
        st.dictionaries(_ATTRIBUTE_NAMES, inner, max_size=3).map(
            lambda attrs: type("Weird", (), attrs)()
        ),
    ),
    max_leaves=4,
)
_BASES = st.sampled_from([object, Exception, ValueError, OSError, TimeoutError, RetryableError])


@given(base=_BASES, attributes=st.dictionaries(_ATTRIBUTE_NAMES, _VALUES, max_size=4))
def test_error_class_of_never_raises_whatever_the_object(
    base: type, attributes: dict[str, Any]
) -> None:
    weird: Any = type("Weird", (base,), attributes)
    obj = weird.__new__(weird)  # no __init__: our errors require a message
    assert error_class_of(obj) in set(ErrorClass)
    seconds = retry_after_of(obj)
    assert seconds is None or seconds >= 0


# ----------------------------------------------------------------------- retry_after_of

NOW = datetime.datetime(2015, 10, 21, 7, 27, 30, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        ("7", 7.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        (datetime.timedelta(seconds=4), 4.0),
        (-3, 0.0),
        ("-3", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 30.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: go now
        (math.nan, None),
        (math.inf, None),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("1_000", None),
        ("soon", None),
        ("", None),
        (True, None),
        (None, None),
        ([3], None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(retry_after: object, expected: object) -> None:
    assert retry_after_of(StatusError(retry_after=retry_after), now=NOW) == expected


def test_retry_after_compares_an_http_date_with_the_given_now() -> None:
    exc = StatusError(headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert retry_after_of(exc, now=NOW) == 30.0
    assert retry_after_of(exc, now=NOW + 10) == 20.0


def test_an_http_date_without_now_is_compared_with_wall_time() -> None:
    far_future = "Fri, 01 Jan 2100 00:00:00 GMT"
    seconds = retry_after_of(StatusError(retry_after=far_future))
    assert seconds is not None
    assert seconds > 365 * 24 * 3600


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "12"},
        {"retry-after": "12"},
        {"RETRY-AFTER": "12"},
        [("Retry-After", "12")],
        [(b"retry-after", b"12")],
        (("X-Other", "1"), ("Retry-After", "12")),
    ],
)
def test_retry_after_finds_the_header_in_any_shape(headers: object) -> None:
    assert retry_after_of(StatusError(headers=headers)) == 12.0
    response = SimpleNamespace(headers=headers)
    assert retry_after_of(StatusError(response=response)) == 12.0


def test_retry_after_reads_an_email_message_like_urllib_gives() -> None:
    headers = Message()
    headers["Retry-After"] = "12"
    assert retry_after_of(StatusError(headers=headers)) == 12.0


def test_retry_after_ms_is_preferred_and_read_as_milliseconds() -> None:
    headers = {"retry-after": "12", "retry-after-ms": "1500"}
    assert retry_after_of(StatusError(headers=headers)) == 1.5


def test_a_bad_retry_after_ms_falls_back_to_retry_after() -> None:
    headers = {"retry-after": "12", "retry-after-ms": "soon"}
    assert retry_after_of(StatusError(headers=headers)) == 12.0


def test_the_attribute_wins_over_headers_unless_it_is_unusable() -> None:
    headers = {"Retry-After": "12"}
    assert retry_after_of(StatusError(retry_after=3, headers=headers)) == 3.0
    assert retry_after_of(StatusError(retry_after="soon", headers=headers)) == 12.0


def test_own_headers_win_over_the_response_headers() -> None:
    exc = StatusError(headers={"Retry-After": "1"}, response=SimpleNamespace(headers=[]))
    assert retry_after_of(exc) == 1.0
    exc = StatusError(headers={}, response=SimpleNamespace(headers={"Retry-After": "2"}))
    assert retry_after_of(exc) == 2.0


@pytest.mark.parametrize(
    "exc",
    [
        StatusError(),
        StatusError(headers="Retry-After: 12"),
        StatusError(headers=Mock()),
        StatusError(headers=MagicMock()),
        StatusError(response=Mock()),
        StatusError(headers=[("Retry-After",)]),
        StatusError(headers=12),
        None,
    ],
)
def test_retry_after_without_a_usable_value_is_none(exc: object) -> None:
    assert retry_after_of(exc) is None


_RETRY_AFTER_VALUES = st.one_of(
    st.text(),
    st.text(alphabet="0123456789.-+ e"),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(),
    st.datetimes(timezones=st.just(datetime.UTC)).map(
        lambda moment: moment.strftime("%a, %d %b %Y %H:%M:%S GMT")
    ),
)


@given(
    value=_RETRY_AFTER_VALUES,
    now=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
)
def test_retry_after_of_never_raises_and_is_never_negative(value: object, now: float) -> None:
    for exc in (
        StatusError(retry_after=value),
        StatusError(headers={"Retry-After": value}),
        StatusError(headers=[("retry-after-ms", value)]),
    ):
        seconds = retry_after_of(exc, now=now)
        assert seconds is None or (seconds >= 0 and math.isfinite(seconds))
