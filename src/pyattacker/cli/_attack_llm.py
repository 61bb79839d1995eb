"""The LLM flags of ``pyattacker attack --llm``: an :class:`~pyattacker.attack.LlmSpec`
from them, and errors named by the flag the user typed (``--max-tokens``, not
``llm.max_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pyattacker._inputs import loads
from pyattacker.attack import LlmSpec
from pyattacker.errors import ConfigError
from pyattacker.llm import Api, JsonlPrompts, PromptSource, SyntheticPrompts, parse_shape

__all__ = ["named_by_flag", "no_llm_flags", "spec_from_flags"]

T = TypeVar("T")


def spec_from_flags(
    model: str | None,
    shape: str | None,
    prompts_path: str | None,
    max_tokens: int | None,
    api: str,
    stream: bool,
    params: Sequence[str],
    seed: int,
    azure_deployment: str | None,
    api_version: str | None,
) -> LlmSpec:
    prompts: PromptSource
    if (shape is None) == (prompts_path is None):
        raise ConfigError(
            "an LLM attack needs its prompts"
            if shape is None
            else "--shape and --prompts cannot both be given",
            field="--shape",
            hint="give --shape CONTEXT:MAX_TOKENS (e.g. 1000:200) or --prompts FILE.jsonl",
        )
    if shape is not None:
        if max_tokens is not None:
            raise ConfigError(
                "--max-tokens applies to --prompts files; --shape names its own",
                field="--max-tokens",
                hint="write the cap in the shape: CONTEXT:MAX_TOKENS",
            )
        prompts = SyntheticPrompts.from_shape(_flag(parse_shape, shape, "--shape"), seed=seed)
    else:
        assert prompts_path is not None
        prompts = _flag(JsonlPrompts, prompts_path, "--prompts")
    extra = _params(params)
    return _flag(
        lambda _: LlmSpec(
            model,
            prompts,
            max_tokens=max_tokens,
            api=Api(api),
            stream=stream,
            azure_deployment=azure_deployment,
            api_version=api_version,
            extra=extra,
        ),
        None,
        "--model",
    )


def _flag(make: Callable[[Any], T], value: Any, flag: str) -> T:
    """``make(value)``, with a ConfigError's field renamed to the flag the user typed."""
    try:
        return make(value)
    except ConfigError as exc:
        renamed = named_by_flag(exc)
        raise ConfigError(
            exc.message, field=flag if renamed is exc else renamed.field, hint=exc.hint
        ) from None


def named_by_flag(exc: ConfigError) -> ConfigError:
    """An error about an LlmSpec field (``llm.<name>...``) named by its flag; else ``exc``."""
    field = exc.field or ""
    if not field.startswith("llm."):
        return exc
    flag = _LLM_FLAGS.get(field.split(".")[1], "--llm")
    return ConfigError(exc.message, field=flag, hint=exc.hint)


# LlmSpec's fields (``llm.<name>...`` in its errors) and the flags that set them
_LLM_FLAGS = {
    "model": "--model",
    "max_tokens": "--max-tokens",
    "api": "--api",
    "extra": "--param",
    "prompts": "--prompts",
    "prompt": "--prompts",
}


def _params(params: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for text in params:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(
                f"cannot read {text!r}", field="--param", hint="write it as NAME=VALUE"
            )
        try:
            out[name] = loads(raw, "--param")
        except json.JSONDecodeError:
            out[name] = raw
    return out


def no_llm_flags(**given: object) -> None:
    """Refuse LLM-only flags on an HTTP attack (they would be silently ignored)."""
    for name, value in given.items():
        if value is not None:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} applies to LLM attacks only", field=flag, hint="add --llm")
