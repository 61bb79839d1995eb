"""The flags of ``pyattacker attack`` as one typed value, as click hands them over."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyattacker.attack import MixLine

__all__ = ["AttackFlags"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AttackFlags:
    """Every option of ``pyattacker attack`` by its parameter name, still unparsed: the
    command turns them into a plan, limits and outputs, naming the flag in every error."""

    rate: str | None
    arrival: str | None
    stages: str | None
    clients: int | None
    think: str | None
    duration: str | None
    requests_: int | None
    method: str
    headers: Sequence[str]
    keys: Sequence[str]
    keys_file: str | None
    body: str | None
    timeout: str | None
    connect_timeout: str
    max_head_size: str
    keep_body: str
    retry: str
    algorithm: str
    connections: int
    preconnect: int
    max_in_flight: int
    feedback: bool
    window: str | None
    seed: int
    llm: bool
    model: str | None
    shape: str | None
    prompts_path: str | None
    max_tokens: int | None
    api: str
    stream: bool
    params: Sequence[str]
    azure_deployment: str | None
    api_version: str | None
    json_path: str | None
    markdown_path: str | None
    samples_path: str | None
    html_path: str | None
    thresholds: Sequence[str]
    abort_on_fail: bool
    goodput: str | None
    serve: str | None
    serve_host: str
    serve_linger: str
    quiet: bool
    # attack --sweep and --warmup (cli/_attack_sweep.py)
    sweep: str | None = None
    sweep_levels: int | None = None
    warmup: str | None = None
    scenario: str | None = None
    insecure: bool = False
    cacert: str | None = None
    cert: str | None = None
    cert_key: str | None = None
    follow_redirects: int = 0
    resolve: Sequence[str] = ()  # --resolve HOST:PORT:ADDRESS (cli/_attack_http.py)
    # --targets (a file, or a plan file's inline lines), --data, --data-order
    targets_path: str | Sequence[MixLine] | None = None
    data_path: str | None = None
    data_order: str = "sequential"
    # attack --workers and --per-worker (cli/_attack_workers.py)
    workers: int = 1  # AUTO (0) for --workers auto, until workers_checked resolves it
    per_worker: bool = False
    ray_address: str | None = None  # attack --ray [ADDRESS]: "" without one
    sender: str | None = None  # --sender NAME: a plugin's sender (cli/_attack_http.py)
    plan_file: str | None = None  # -c PLAN: the file the other values came from, if any
