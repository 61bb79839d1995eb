"""The mock LLM server as its own process: ``python -m pyattacker llm-server ...``."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.servers._delays import Delay, spec_duration
from pyattacker.servers._fleet import check_processes
from pyattacker.servers._llm_dice import TokenCount
from pyattacker.servers._llm_settings import MAX_OUTPUT_TOKENS, Settings, settings
from pyattacker.servers._process import ServerProcess
from pyattacker.world import FailureProfile

__all__ = ["API_KEYS_ENV", "LlmServerProcess"]

#: the environment variable ``llm-server --api-key`` also reads (keys separated by spaces)
API_KEYS_ENV = "PYATTACKER_LLM_SERVER_API_KEYS"


class LlmServerProcess(ServerProcess):
    """``pyattacker llm-server`` in a child process; arguments as for
    :class:`~pyattacker.servers.LlmServer`, checked here (``ConfigError`` naming the
    argument) before anything is spawned.

    ``start()`` returns the URL; ``stats()``, ``reset()`` and ``stop()`` as for
    :class:`~pyattacker.servers.EchoServerProcess` (with the first API key, when keys are
    required). ``command_prefix`` goes before the Python executable (``["taskset", "-c",
    "1"]`` pins the server to a core). ``processes``: that many server processes behind
    the one port (``--processes``; Linux), ``stats()`` and ``reset()`` covering them all.
    The keys reach the child through
    ``$PYATTACKER_LLM_SERVER_API_KEYS``, which is set for it, or removed when there are
    none: a value the parent happens to have never applies.
    """

    what = "LLM server"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        models: str | Sequence[str] = ("mock-llm",),
        ttft: Delay | str = "lognormal:median=200ms,sigma=0.5",
        itl: Delay | str = "fixed:20ms",
        output_tokens: TokenCount | str | int = "lognormal:median=100,sigma=0.5",
        max_output_tokens: int = MAX_OUTPUT_TOKENS,
        capacity: int | None = None,
        overflow: str = "queue",
        rpm: int | None = None,
        tpm: int | None = None,
        fail: Mapping[int, float] | None = None,
        storms: FailureProfile | str | None = None,
        api_keys: str | Sequence[str] = (),
        seed: int = 0,
        utilization_header: bool = False,
        processes: int = 1,
        extra_args: Sequence[str] = (),
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.settings = settings(
            models=models,
            ttft=ttft,
            itl=itl,
            output_tokens=output_tokens,
            max_output_tokens=max_output_tokens,
            capacity=capacity,
            overflow=overflow,
            rpm=rpm,
            tpm=tpm,
            fail=fail,
            storms=storms,
            api_keys=api_keys,
            seed=seed,
            utilization_header=utilization_header,
        )
        check_processes(processes, "processes")
        self.processes = processes
        command = [*command_prefix, sys.executable, "-m", "pyattacker", "llm-server"]
        if processes > 1:
            command += ["--processes", str(processes)]
        command += ["--host", host, "--port", "0", *arguments(self.settings), *extra_args]
        # Keys go through the environment: a command line shows in ps and in our messages.
        keys = " ".join(self.settings.api_keys)
        super().__init__(command, env={API_KEYS_ENV: keys or None})

    def stats(
        self, *, samples: bool = False, offset: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """``GET /stats`` as a dict; with ``samples=True`` the records from the
        ``offset``-th, at most ``limit`` of them (``/stats?samples=1&offset=&limit=``)."""
        if not samples:
            return self._call("GET", "/stats")
        query = f"/stats?samples=1&offset={offset}"
        return self._call("GET", query if limit is None else f"{query}&limit={limit}")

    def _headers(self) -> dict[str, str]:
        keys = self.settings.api_keys
        return {"Authorization": f"Bearer {keys[0]}"} if keys else {}

    def __repr__(self) -> str:
        return (
            f"<LlmServerProcess {self._url or 'not started'} models={list(self.settings.models)}>"
        )


def arguments(checked: Settings) -> list[str]:
    """The ``llm-server`` options that rebuild ``checked``, API keys excepted."""
    args = [arg for model in checked.models for arg in ("--model", model)]
    args += ["--ttft", checked.ttft.describe(), "--itl", checked.itl.describe()]
    args += ["--output-tokens", checked.output_tokens.describe(), "--seed", str(checked.seed)]
    args += ["--max-output-tokens", str(checked.max_output_tokens)]
    for flag, value in (("--capacity", checked.capacity), ("--rpm", checked.rpm)):
        if value is not None:
            args += [flag, str(value)]
    if checked.tpm is not None:
        args += ["--tpm", str(checked.tpm)]
    args += ["--overflow", checked.overflow]
    storms = checked.storms
    fail = dict(checked.fail) or ({503: storms.error_rate} if storms.error_rate else {})
    args += [arg for s, f in sorted(fail.items()) for arg in ("--fail", f"{s}={f!r}")]
    if storms.storm_rate > 0:
        duration = spec_duration(storms.storm_duration_s)
        spec = (
            f"rate={storms.storm_rate!r},duration={duration},error_rate={storms.storm_error_rate!r}"
        )
        args += ["--storms", spec]
    if checked.utilization_header:
        args.append("--utilization-header")
    return args
