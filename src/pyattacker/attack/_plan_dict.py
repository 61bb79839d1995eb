"""How an attack's plan reads in its report: every setting, never a key or a secret.

The plan's own headers are listed by name only. A mix's lines say what each sends
(method, URL, headers, body), with secrets hidden as everywhere else we show settings
(``pyattacker._secrets``, as the run report's config): a secret-looking header's value,
JSON field or form/query parameter is ``***``, and an API key written out is ``***`` too.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pyattacker._secrets import MASK, is_secret_key, mask, mask_url, scrub
from pyattacker.attack._data import DataRows
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ClosedModel, OpenModel
from pyattacker.attack._mix import MixLine
from pyattacker.attack._plan import AttackPlan
from pyattacker.llm import JsonlPrompts, PromptSource, SyntheticPrompts
from pyattacker.retry import Retrying

__all__ = ["BODY_SHOWN", "llm_plan_dict", "plan_dict", "prompts_dict", "retry_label"]

#: A mix line's body up to this many bytes of UTF-8 is shown as text; a longer (or binary)
#: one by its length and SHA-256 only, so a report stays readable whatever the payloads.
BODY_SHOWN = 1024


def retry_label(policy: Retrying) -> str:
    """A short, honest description of a retry policy for report headers."""
    if policy.max_attempts == 1:
        return "none (one attempt per request)"
    label = (
        f"up to {policy.max_attempts} attempts, backoff {policy.base:g}s x{policy.factor:g} "
        f"capped at {policy.cap:g}s, jitter {policy.jitter}, Retry-After honoured"
    )
    if policy.max_total_s is not None:
        label += f", at most {policy.max_total_s:g}s in all"
    if policy.on:
        names = ", ".join(o if isinstance(o, str) else o.__name__ for o in policy.on)
        label += f", also on {names}"
    if not policy.retry_classified:
        label += ", only on those"
    if policy.retry_unknown:
        label += ", unknown errors too"
    return label


def plan_dict(plan: AttackPlan) -> dict[str, Any]:
    load = plan.load
    model: dict[str, Any]
    if isinstance(load, OpenModel):
        model = {
            "model": "open",
            "rate": load.rate,
            "stages": [[s.duration, s.rate] for s in load.stages],
            "arrival": load.arrival,
            "max_in_flight": load.max_in_flight,
        }
    else:
        assert isinstance(load, ClosedModel)
        model = {"model": "closed", "clients": load.clients, "think_time": load.think_time}
    data: dict[str, Any] = {
        "targets": [str(t) for t in plan.targets],
        "load": model,
        "duration_s": plan.duration,
        "requests": plan.requests,
        "method": plan.method,
        "headers": [name for name, _ in plan.headers],  # names only: values may be secrets
        "keys": len(plan.keys),  # how many, never which
        "timeouts_s": {
            "connect": plan.timeouts.connect,
            "read": plan.timeouts.read,
            "total": plan.timeouts.total,
        },
        "retry": retry_label(plan.retry),
        "algorithm": plan.algorithm if isinstance(plan.algorithm, str) else repr(plan.algorithm),
        "connections": plan.connections,
        "preconnect": plan.preconnect,
        "feedback": plan.feedback,
        "window_s": plan.window,
        "seed": plan.seed,
        "tls": None if plan.tls is None else plan.tls.to_dict(),
        "resolve": [str(entry) for entry in plan.resolve],
        "follow_redirects": plan.follow_redirects,
    }
    if plan.scenario is not None:
        data["scenario"] = plan.scenario.label
    rows = _data_rows(plan)
    if rows is not None:  # --data, whether a mix's templates or a scenario's flows read it
        data["data"] = rows.describe()
    if plan.llm is None:  # an LLM attack builds each body from a prompt
        data["body_bytes"] = len(plan.body) if plan.body else 0
    else:
        data["llm"] = llm_plan_dict(plan.llm)
    if plan.warmup is not None:
        data["warmup"] = plan.warmup.to_dict()
    if plan.mix is not None:
        data["mix"] = _mix_dict(plan)
    if plan.sender is not None:
        data["sender"] = plan.sender
    if plan.file is not None:
        data["file"] = plan.file
    return data


def _data_rows(plan: AttackPlan) -> DataRows | None:
    """The ``--data`` rows of ``plan``: its mix's, or those its scenario's flows take (the
    command gives a scenario ``DataRows.row``, a bound method, as its row provider)."""
    if plan.mix is not None:
        return plan.mix.data
    provider = None if plan.scenario is None else plan.scenario.rows
    rows = getattr(provider, "__self__", None)
    return rows if isinstance(rows, DataRows) else None


def _mix_dict(plan: AttackPlan) -> dict[str, Any]:
    """The mix's description (names, weights, shares, source, data: what reports and
    ``compare`` read) with what each line sends added."""
    assert plan.mix is not None
    described = plan.mix.describe(plan.method)
    keys = {key for key in plan.keys if key}  # (scrub would mask between every letter of "")
    for shown, line in zip(described["lines"], plan.mix.lines, strict=True):
        shown.update(_line_sends(line, plan, keys))
    return described


def _line_sends(line: MixLine, plan: AttackPlan, keys: set[str]) -> dict[str, Any]:
    """What ``line`` sends: its method and URL (``None``: each target's own), its own
    headers (added to the plan's, which ``headers`` names) and the body it sends (its own,
    else the plan's), ``{field}`` templates as written."""
    return {
        "method": (line.method or plan.method).upper(),
        "url": None if line.url is None else scrub(mask_url(line.url), keys),
        "headers": [f"{name}: {_header_value(name, value, keys)}" for name, value in line.headers],
        **_body_dict(plan.body if line.body is None else line.body, keys),
        **({"body_file": line.body_file} if line.body_file is not None else {}),
    }


def _header_value(name: str, value: str, keys: set[str]) -> str:
    return MASK if is_secret_key(name) else scrub(mask_url(value), keys)


def _body_dict(body: bytes | None, keys: set[str]) -> dict[str, Any]:
    """``body``: its text when short (secrets masked), else its length and digest."""
    if body is None:
        return {"body": None, "body_bytes": 0}
    text = _short_text(body)
    if text is None:
        digest = hashlib.sha256(body).hexdigest()
        return {"body": None, "body_bytes": len(body), "body_sha256": digest}
    return {"body": scrub(_masked_text(text), keys), "body_bytes": len(body)}


def _short_text(body: bytes) -> str | None:
    """``body`` as text when at most :data:`BODY_SHOWN` bytes of UTF-8, else None."""
    if len(body) > BODY_SHOWN:
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        return None  # binary


def _masked_text(text: str) -> str:
    """A JSON body with its secret-looking fields ``***`` (written compact, as a targets
    line's JSON body is sent), or a form body with its secret-looking parameters ``***``."""
    try:
        value = json.loads(text)
    except ValueError:  # not JSON (a template such as {"id": {id}} is not, either)
        return mask_url("?" + text)[1:] if "=" in text else text
    masked = mask(value)
    return text if masked == value else json.dumps(masked, separators=(",", ":"))


def llm_plan_dict(spec: LlmSpec) -> dict[str, Any]:
    """What an LLM attack asked for: every setting of ``spec``, never a key (keys live in
    the plan's ``keys``, not in the spec). ``extra`` parameters are request body fields
    (``temperature``...), shown with their values (one may replace ``max_tokens``).
    ``max_tokens`` is the cap the requests ask for: a synthetic shape's (which names one
    for every prompt, so the spec's is unused), else the spec's, sent for the JSONL lines
    that name none (``None``: those send none, and the server decides)."""
    return {
        "model": spec.model,
        "api": spec.api.value,
        "stream": spec.stream,
        "prompts": prompts_dict(spec.prompts),
        "max_tokens": _effective_max_tokens(spec),
        "azure_deployment": spec.azure_deployment,
        "api_version": spec.api_version,
        "extra": dict(spec.extra),
    }


def _effective_max_tokens(spec: LlmSpec) -> int | None:
    prompts = spec.prompts
    return prompts.max_tokens if isinstance(prompts, SyntheticPrompts) else spec.max_tokens


def prompts_dict(prompts: PromptSource) -> dict[str, Any]:
    """How a prompt source makes prompts: the shape of synthetic ones (and how their
    length is approximated), or the file's name and prompt count."""
    if isinstance(prompts, SyntheticPrompts):
        return {
            "kind": "synthetic",
            "context_tokens": prompts.context_tokens,
            "max_tokens": prompts.max_tokens,
            "seed": prompts.seed,
            "note": f"{prompts.context_tokens} common English words, about one token each",
        }
    if isinstance(prompts, JsonlPrompts):
        return {"kind": "jsonl", "file": prompts.path.name, "lines": len(prompts)}
    return {"kind": type(prompts).__name__}
