"""Timing records, mergeable histograms, windows and summaries.

* :class:`Attempt` / :class:`RequestRecord` — the facts of one try and of one logical
  request, with latency on two named clocks (``scheduled`` and ``sent``);
  :data:`SAMPLE_COLUMNS` / :data:`LLM_SAMPLE_COLUMNS` name the columns of a request's row.
* :class:`Histogram` — log-linear, bounded, exactly mergeable; percentiles within 0.05 %
  for values >= 1 µs. :func:`exact_percentile` is the one percentile definition.
  :class:`Binned` — values bucketed once for several histograms.
* :class:`RequestStats` — counts and histograms of many requests, with TTFT, ITL, TPOT
  and token counts for streamed LLM answers; :class:`WindowSeries` — the same per fixed
  time window. A request is counted alone (``add``, ``add_attempt``) or, when it is a
  plain OK answer (:func:`is_plain_ok`), in an :class:`OkBatch` that each of them adds
  to its own figures (``add_ok_batch``; :func:`add_ok_answers` does both): the same
  figures for less work, since most of a load test is plain OK answers. A batch reads
  them from attempts or from their rows (:data:`PlainRow`, :func:`plain_row`), which a
  caller that never builds an attempt can give instead.

Everything here merges exactly (also across processes, via ``to_dict``/``from_dict``), so
workers aggregate locally and a coordinator adds them up. Nothing here reads a clock: the
caller passes timestamps.
"""

from pyattacker.measure._batch import (
    OkBatch,
    PlainRow,
    add_ok_answers,
    is_plain_ok,
    plain_row,
    row_attempt,
)
from pyattacker.measure._binned import Binned, record_all
from pyattacker.measure._histogram import Histogram
from pyattacker.measure._phases import PHASES, Phases
from pyattacker.measure._records import (
    ANSWERED,
    LLM_SAMPLE_COLUMNS,
    SAMPLE_COLUMNS,
    Attempt,
    Outcome,
    RequestRecord,
)
from pyattacker.measure._stats import RequestStats
from pyattacker.measure._summary import PERCENTILES, Summary, exact_percentile, nearest_rank
from pyattacker.measure._windows import Window, WindowSeries

__all__ = [
    "ANSWERED",
    "LLM_SAMPLE_COLUMNS",
    "PERCENTILES",
    "PHASES",
    "SAMPLE_COLUMNS",
    "Attempt",
    "Binned",
    "Histogram",
    "OkBatch",
    "Outcome",
    "Phases",
    "PlainRow",
    "RequestRecord",
    "RequestStats",
    "Summary",
    "Window",
    "WindowSeries",
    "add_ok_answers",
    "exact_percentile",
    "is_plain_ok",
    "nearest_rank",
    "plain_row",
    "record_all",
    "row_attempt",
]
