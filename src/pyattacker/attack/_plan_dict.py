"""How an attack's plan reads in its report: every setting, never a key or a header value."""

from __future__ import annotations

from typing import Any

from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ClosedModel, OpenModel
from pyattacker.attack._plan import AttackPlan
from pyattacker.llm import JsonlPrompts, PromptSource, SyntheticPrompts
from pyattacker.retry import Retrying

__all__ = ["llm_plan_dict", "plan_dict", "prompts_dict", "retry_label"]


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
        "follow_redirects": plan.follow_redirects,
    }
    if plan.scenario is not None:
        data["scenario"] = plan.scenario.label
    if plan.llm is None:  # an LLM attack builds each body from a prompt
        data["body_bytes"] = len(plan.body) if plan.body else 0
    else:
        data["llm"] = llm_plan_dict(plan.llm)
    if plan.warmup is not None:
        data["warmup"] = plan.warmup.to_dict()
    if plan.mix is not None:
        data["mix"] = plan.mix.describe(plan.method)
    if plan.sender is not None:
        data["sender"] = plan.sender
    return data


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
