"""``pyattacker attack``: honest load against one or more HTTP targets.

The command parses and validates everything first (a bad flag exits 2 before any request
is sent or any file written), runs :func:`pyattacker.attack.run_attack`, and renders the
result. Exit codes: 0 every request succeeded, 1 some did not (the report says which), 2
bad input, 130 interrupted (the report of what ran is still printed). With --threshold the
thresholds decide (:class:`pyattacker.report.Gate`): 0 all passed, 99 a breach.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import click

from pyattacker._inputs import loads, read_bounded
from pyattacker._secrets import mask_url
from pyattacker._units import parse_duration, parse_rate
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    LlmSpec,
    Mix,
    OpenModel,
    SampleWriter,
    flag_of,
)
from pyattacker.cli import _attack_workers as workers  # --workers, --ray
from pyattacker.cli._attack_flags import AttackFlags
from pyattacker.cli._attack_help import EPILOG
from pyattacker.cli._attack_http import http_options, http_plan_options, resolve_note
from pyattacker.cli._attack_llm import named_by_flag, no_llm_flags, spec_from_flags
from pyattacker.cli._attack_mix import mix_for, mix_options
from pyattacker.cli._attack_plan_file import from_plan_file
from pyattacker.cli._attack_scenario import flows_of, scenario_option
from pyattacker.cli._attack_stages import parse_stages
from pyattacker.cli._attack_sweep import nothing_measured, sweep_command, sweep_options, warmup_of
from pyattacker.cli._html import html_option, write_attack_html
from pyattacker.cli._progress import LiveProgress
from pyattacker.cli._proxy_note import proxy_note
from pyattacker.cli._report_files import check_report_path, write_report
from pyattacker.cli._serve import Serving, serve_options
from pyattacker.errors import ConfigError
from pyattacker.http import HEAD_SIZE_RANGE, KEEP_BODY_RANGE, Limits, Timeouts, parse_size
from pyattacker.pool import ALGORITHMS
from pyattacker.report import Gate, attack_json, attack_markdown, attack_text
from pyattacker.retry import Retrying, resolve_retry

__all__ = ["attack_command"]


@click.command("attack", epilog=EPILOG)
@click.argument("urls", nargs=-1, metavar="URL [URL...]")
@click.option(
    "--rate",
    metavar="RATE",
    help="Open model: arrivals per second, e.g. 500/s, 30/m; at most 10,000,000/s.",
)
@click.option(
    "--arrival",
    type=click.Choice(["constant", "poisson"]),
    help="Open model: evenly spaced (the default) or Poisson arrivals.",
)
@click.option(
    "--stages",
    metavar="STAGES",
    help="Open model ramps DURATION:RATE,... each linear from the previous rate "
    "(from --rate, default 0), e.g. 10s:100/s,30s:500/s.",
)
@click.option("--clients", type=int, metavar="N", help="Closed model: this many clients in a loop.")
@click.option(
    "--think",
    metavar="DURATION",
    help="Closed model: pause between requests.",
)
@click.option(
    "--duration", metavar="DURATION", help="Stop scheduling after this long, e.g. 30s, 2m."
)
@click.option(
    "--requests", "requests_", type=int, metavar="N", help="Stop after this many requests."
)
@click.option("-X", "--method", default="GET", show_default=True, help="HTTP method.")
@click.option(
    "-H", "--header", "headers", multiple=True, metavar="HEADER", help="'Name: value' (repeatable)."
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="An API key (repeatable); each URL and key is one target. A header carries it: "
    "-H 'Authorization: Bearer {key}', or the URL: '...?key={key}'. Keys never appear in "
    "a report (nor does any secret-looking query value: ?token=***).",
)
@click.option(
    "--keys-file", metavar="FILE", help="API keys, one per line (like --key); at most 1 MiB."
)
@click.option(
    "--body",
    metavar="TEXT|@FILE",
    help="Request body text, or @FILE to read it from a file (at most 64 MiB).",
)
@click.option(
    "--timeout",
    metavar="DURATION",
    help="Whole-request timeout (streams included).  [default: 30s; 10m with --llm]",
)
@click.option(
    "--connect-timeout",
    default="10s",
    metavar="DURATION",
    show_default=True,
    help="Connect timeout.",
)
@click.option(
    "--max-head-size",
    default="64KiB",
    metavar="SIZE",
    show_default=True,
    help="Longest response head accepted (status line and headers); a longer one ends its "
    "request as error class 'protocol' and closes the connection.",
)
@click.option(
    "--keep-body",
    default="4KiB",
    metavar="SIZE",
    show_default=True,
    help="Bytes of each response body kept in memory; every byte is still read and counted. "
    "An --llm attack keeps at least 8MiB (the longest answer it parses).",
)
@click.option(
    "--retry",
    default="none",
    metavar="POLICY",
    show_default=True,
    help="none, exponential, or a JSON object of Retrying settings "
    '(e.g. \'{"max_attempts": 3, "base": 0.1}\').',
)
@click.option(
    "--algorithm",
    default="wait",
    show_default=True,
    metavar="NAME",
    help=f"Acquire algorithm: {', '.join(sorted(ALGORITHMS))}.",
)
@click.option(
    "--connections", default=256, show_default=True, help="Connections per target (its capacity)."
)
@click.option(
    "--preconnect",
    default=0,
    show_default=True,
    metavar="N",
    help="Open N connections per target before the first request, as wrk does: no "
    "request's time is then spent connecting (at most --connections).",
)
@click.option(
    "--max-in-flight",
    default=10_000,
    show_default=True,
    help="Open model: arrivals beyond this many requests in progress are dropped and counted.",
)
@click.option(
    "--feedback/--no-feedback",
    default=False,
    show_default=True,
    help="Let errors and Retry-After steer the algorithm (may slow the offered load).",
)
@click.option(
    "--window",
    metavar="DURATION",
    help="Time-series window.  [default: 1s; 10s with --llm]",
)
@click.option("--seed", default=0, show_default=True, help="Seed for Poisson arrivals and jitter.")
@click.option(
    "--llm/--no-llm",
    default=False,
    help="The URLs are OpenAI-compatible LLM endpoints (base URLs such as .../v1).",
)
@click.option("--model", metavar="NAME", help="LLM: the model every request asks for.")
@click.option(
    "--shape",
    metavar="CONTEXT:MAX_TOKENS",
    help="LLM: synthetic prompts of CONTEXT tokens asking for at most MAX_TOKENS, e.g. 1000:200.",
)
@click.option(
    "--prompts",
    "prompts_path",
    metavar="FILE.jsonl",
    help='LLM: prompts, one JSON object per line: {"messages": [...]} or {"prompt": "..."}, '
    'optionally "max_tokens"; used in turn. At most 256 MiB.',
)
@click.option(
    "--max-tokens",
    type=int,
    metavar="N",
    help="LLM: the output cap of a --prompts line that names none.",
)
@click.option(
    "--api",
    type=click.Choice(["chat", "completions"]),
    default="chat",
    show_default=True,
    help="LLM: chat/completions or completions.",
)
@click.option(
    "--stream/--no-stream",
    default=True,
    show_default=True,
    help="LLM: stream the answer (TTFT and inter-token latency need it).",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="LLM: another request parameter (repeatable), VALUE as JSON if it parses, "
    "e.g. temperature=0, ignore_eos=true.",
)
@click.option("--azure-deployment", metavar="NAME", help="LLM: the Azure OpenAI deployment.")
@click.option("--api-version", metavar="VERSION", help="LLM: Azure OpenAI api-version.")
@click.option(
    "--json", "json_path", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout)."
)
@click.option(
    "--markdown", "markdown_path", metavar="PATH", help="Write a Markdown report to PATH."
)
@click.option(
    "--samples", "samples_path", metavar="PATH", help="Write one row per request (.csv or .jsonl)."
)
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="EXPR",
    help="A pass/fail gate (repeatable), e.g. 'p95(latency) < 250ms', 'error_rate < 1%', "
    "'rate >= 95/s', 'p99(ttft) < 2s', 'goodput >= 90%'. Figures: pQ/mean/min/max of latency "
    "(scheduled clock), service_time (sent clock), ttft, ttft_scheduled, itl, tpot, e2e, "
    "e2e_scheduled; error_rate, throttled_rate, goodput, flow_failure_rate (%); rate, "
    "tokens_per_s, "
    "goodput_rate (/s). With thresholds the exit code is theirs: 0 all passed, 99 a breach.",
)
@click.option(
    "--abort-on-fail/--no-abort-on-fail",
    default=False,
    help="Stop the attack at the first breach seen live (judged every 0.5s on p50/p99 of "
    "latency, service_time and ttft, error_rate and throttled_rate); exit 99.",
)
@click.option(
    "--goodput",
    metavar="SLOS",
    help="LLM: count the requests that met every per-request SLO, e.g. "
    "ttft<500ms,tpot<50ms,e2e<10s: their share and rate (as vLLM's bench).",
)
@html_option(
    "the report (latency over time on both clocks and by percentile, rates, errors; with "
    "--llm also TTFT, ITL, TPOT and tokens per second)"
)
@http_options
@serve_options
@sweep_options
@scenario_option
@mix_options
@workers.workers_options
@click.option(
    "-q", "--quiet/--no-quiet", default=False, help="No live progress, no start line on stderr."
)
def attack_command(urls: Sequence[str], **options: Any) -> int:
    """Send load to URL(s) at a planned rate (--rate/--stages) or from N clients (--clients),
    and report latency on both clocks, dispatch delay, status codes, errors, retries and a
    time series. Several URLs form one pool; --algorithm picks a target per attempt.
    """
    urls, options = from_plan_file(urls, options)  # -c PLAN: the flags not typed
    flags = workers.workers_checked(AttackFlags(**options))  # --workers, --ray
    urls, mix = mix_for(urls, flags.targets_path, flags.data_path, flags.data_order, flags.seed)
    if flags.sweep is not None:  # one attack per level: cli/_attack_sweep.py
        return sweep_command(flags, functools.partial(_plan, urls, mix=mix), _limits(flags))
    plan = flows_of(_plan(urls, flags, mix), flags.scenario, flags.targets_path)
    if not workers.one_process(flags):  # refused before a word is printed or a file made
        workers.check_shared(plan, flags.workers)
    gate = Gate.from_flags(flags.thresholds, flags.goodput, flags.abort_on_fail, llm=flags.llm,
                           scenario=flags.scenario is not None)  # fmt: skip
    limits = _limits(flags)
    serving = Serving.from_flags(flags.serve, flags.serve_host, flags.serve_linger)
    _check_outputs(flags)
    samples = workers.open_samples(flags)  # one file, or a part per worker
    live = None if flags.quiet else LiveProgress.for_stderr()
    shown = ", ".join(mask_url(url) for url in urls)
    if not flags.quiet:
        click.echo(f"attacking {shown} — Ctrl-C stops and reports what ran", err=True)
    sparse = workers.sparse_note(plan, flags.workers, on_ray=flags.ray_address is not None)
    for note in (proxy_note(urls), resolve_note(plan), sparse):
        if note is not None:
            click.echo(note, err=True)
    on_record = gate.on_record(samples.write if isinstance(samples, SampleWriter) else None)
    on_progress = gate.on_progress(None if live is None else live.update)
    finish = functools.partial(_finish, flags, gate, live, samples)
    # None: one process; the workers' lines are printed once the live view is closed
    shared = workers.Shared.of(flags, gate.goodput, samples, live)
    try:
        if serving is None:
            result = workers.run_plan(flags, plan, on_record, on_progress, limits, shared)
        else:  # the report is printed when the attack ends, before the server's linger
            result = serving.run(plan, on_record=on_record, on_progress=on_progress,
                                 limits=limits, on_finish=finish, sections=gate.sections,
                                 workers=shared)  # fmt: skip
    finally:
        _close(live, samples)
    if serving is None:
        finish(result)
    samples_failed = samples is not None and workers.samples_failed(samples, flags.samples_path)
    empty = nothing_measured(result)  # a closed model's warmup can take every request
    if empty is not None:
        click.echo(empty, err=True)
        return 1
    if gate.declared:  # thresholds decide the exit code (docs/attack.md, "Exit codes")
        return gate.exit_code(result, output_failed=samples_failed)
    if result.interrupted:
        click.echo("interrupted (Ctrl-C or SIGTERM): the report covers what ran before", err=True)
        return 130
    if samples_failed:
        return 1
    # a flow failed in its own code fails no request: all_succeeded counts the flows too
    return workers.workers_exit(result, 0 if result.all_succeeded else 1)  # 3: one died


def _plan(urls: Sequence[str], f: AttackFlags, mix: Mix | None) -> AttackPlan:
    """The plan the flags describe; a ConfigError names the flag the user typed."""
    try:
        load = _load_model(f.rate, f.arrival, f.stages, f.clients, f.think, f.max_in_flight)
    except ConfigError as exc:
        raise _by_flag(exc) from None
    llm_spec = _llm_spec(f)
    try:
        return AttackPlan.build(
            urls,
            load,
            duration=None if f.duration is None else parse_duration(f.duration, field="--duration"),
            requests=f.requests_,
            method=f.method,
            headers=[_header(h) for h in f.headers],
            body=_body(f.body),
            timeouts=_timeouts(f.timeout or ("10m" if llm_spec else "30s"), f.connect_timeout),
            retry=_retry(f.retry),
            algorithm=f.algorithm,
            connections=f.connections,
            preconnect=f.preconnect,
            feedback=f.feedback,
            window=parse_duration(f.window or ("10s" if llm_spec else "1s"), field="--window"),
            seed=f.seed,
            keys=_keys(f.keys, f.keys_file),
            llm=llm_spec,
            warmup=warmup_of(f),
            **http_plan_options(
                f.insecure,
                f.cacert,
                f.cert,
                f.cert_key,
                f.follow_redirects,
                f.sender,
                f.resolve,
            ),
            mix=mix,
            file=f.plan_file,
        )
    except ConfigError as exc:
        raise _by_flag(exc) from None


def _llm_spec(f: AttackFlags) -> LlmSpec | None:
    """What an --llm attack asks each endpoint; without --llm, None (and no LLM flag)."""
    if not f.llm:
        no_llm_flags(
            model=f.model,
            shape=f.shape,
            prompts=f.prompts_path,
            max_tokens=f.max_tokens,
            param=f.params or None,
            azure_deployment=f.azure_deployment,
            api_version=f.api_version,
        )
        return None
    return spec_from_flags(f.model, f.shape, f.prompts_path, f.max_tokens, f.api, f.stream,
                           f.params, f.seed, f.azure_deployment, f.api_version)  # fmt: skip


def _limits(f: AttackFlags) -> Limits:
    return Limits(
        max_head=parse_size(f.max_head_size, field="--max-head-size", within=HEAD_SIZE_RANGE),
        keep_body=parse_size(f.keep_body, field="--keep-body", within=KEEP_BODY_RANGE),
    )


def _check_outputs(f: AttackFlags) -> None:
    """Refuse, before any traffic, a report or samples path that could not be written."""
    for path, field in (
        (f.json_path, "--json"),
        (f.markdown_path, "--markdown"),
        (f.samples_path, "--samples"),
    ):
        check_report_path(path, field)


def _close(live: LiveProgress | None, samples: workers.Samples | None) -> None:
    """Stop the progress display and flush the samples (again is harmless)."""
    if live is not None:
        live.close()
    if samples is not None:
        samples.close()


def _finish(
    f: AttackFlags,
    gate: Gate,
    live: LiveProgress | None,
    samples: workers.Samples | None,
    result: AttackResult,
) -> None:
    """The attack is over: progress and samples closed, then the reports."""
    _close(live, samples)
    _report(result, f, gate)


def _report(result: AttackResult, f: AttackFlags, gate: Gate) -> None:
    """The text report (on stderr when the JSON goes to stdout), then the report files,
    each with the gate's verdicts when thresholds or goodput were asked for."""
    click.echo(gate.text(result, attack_text(result)), err=f.json_path == "-")
    if f.json_path:
        write_report(f.json_path, gate.json(result, attack_json(result)))
    if f.markdown_path:
        write_report(f.markdown_path, gate.markdown(result, attack_markdown(result)))
    write_attack_html(f.html_path, {**result.to_dict(), **gate.sections(result)})


def _by_flag(exc: ConfigError) -> ConfigError:
    """``exc`` naming the flag the user typed (``--max-in-flight``, not ``max_in_flight``)."""
    renamed = named_by_flag(exc)
    if renamed is not exc:
        return renamed
    field = flag_of(exc.field)
    return exc if field == exc.field else ConfigError(exc.message, field=field, hint=exc.hint)


def _load_model(
    rate: str | None,
    arrival: str | None,
    stages: str | None,
    clients: int | None,
    think: str | None,
    max_in_flight: int,
) -> OpenModel | ClosedModel:
    if clients is not None:
        if rate is not None or stages is not None or arrival is not None:
            raise ConfigError(
                "--clients (closed model) cannot be combined with --rate/--stages/--arrival "
                "(open model)",
                field="--clients",
                hint="pick one model",
            )
        if clients < 1:
            raise ConfigError(f"must be >= 1, got {clients}", field="--clients")
        return ClosedModel(clients, parse_duration(think or "0", field="--think"))
    if think is not None:
        raise ConfigError(
            "--think applies to the closed model only",
            field="--think",
            hint="use it with --clients N; the open model's pace is --rate/--stages",
        )
    if rate is None and stages is None:
        raise ConfigError(
            "no load model given",
            field="--rate",
            hint="give --rate 100/s (open model), --stages, or --clients N (closed model)",
        )
    start = 0.0 if rate is None else parse_rate(rate, field="--rate")
    return OpenModel(
        rate=start,
        stages=parse_stages(stages) if stages else (),
        arrival=arrival or "constant",  # type: ignore[arg-type]
        max_in_flight=max_in_flight,
    )


def _timeouts(total: str, connect: str) -> Timeouts:
    flags = {"timeouts.total": "--timeout", "timeouts.connect": "--connect-timeout"}
    try:
        return Timeouts(
            connect=parse_duration(connect, field="--connect-timeout"),
            read=None,
            total=parse_duration(total, field="--timeout"),
        )
    except ConfigError as exc:
        field = flags.get(exc.field or "", exc.field)
        raise ConfigError(exc.message, field=field, hint=exc.hint or "e.g. 30s") from None


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not name or any(c in name for c in " \t\r\n"):
        raise ConfigError(
            f"cannot read header {text!r}", field="--header", hint="write it as 'Name: value'"
        )
    value = value.strip()
    if "\r" in value or "\n" in value:
        raise ConfigError("a header value cannot contain a line break", field="--header")
    return name, value


def _keys(keys: Sequence[str], path: str | None) -> tuple[str, ...]:
    found = [k.strip() for k in keys]
    if path is not None:
        try:
            lines = read_bounded(path, "--keys-file").decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"cannot read {path!r}: {exc}", field="--keys-file", hint="one key per line"
            ) from None
        found += [line.strip() for line in lines if line.strip()]
    return tuple(found)


def _body(text: str | None) -> bytes | None:
    if text is None:
        return None
    if text.startswith("@"):
        return read_bounded(text[1:], "--body")
    return text.encode()


def _retry(text: str) -> Retrying:
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            spec = loads(stripped, "--retry")
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON: {exc.msg}", field="--retry") from None
        return resolve_retry(spec)
    return resolve_retry(stripped)
