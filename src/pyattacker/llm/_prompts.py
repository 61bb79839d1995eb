"""Prompt sources: what each request of an LLM attack asks, chosen by its ordinal.

A source maps the request ordinal ``n`` to a :class:`Prompt`, deterministically, so that a
retried attempt sends exactly the prompt its first attempt sent and a rerun sends the
same prompts again.

- :class:`SyntheticPrompts` needs no network and no tokenizer. Each prompt is exactly
  ``context_tokens`` words from :data:`VOCABULARY`, joined by single spaces. Every
  word of that vocabulary is one token, with or without a leading space, in OpenAI's
  ``gpt2``, ``cl100k_base`` and ``o200k_base`` encodings (checked with tiktoken's tables
  when the list was made), and those tokenizers never merge across a space, so the prompt
  is exactly ``context_tokens`` tokens there; the mock LLM server counts whitespace-
  separated words and reports exactly that number. Other tokenizers (SentencePiece
  models such as Llama or Mistral) split a few of these words in two, so a real server
  may report a little more; chat templates add a handful of tokens per message too. The
  server's own count (``usage.prompt_tokens``) is what reports use.
- :class:`JsonlPrompts` reads prompts from a file, one JSON object per line, and cycles
  through them in order.

:func:`parse_shape` reads the ``--shape CONTEXT:MAX_TOKENS`` option. Both numbers are
capped at :data:`MAX_SHAPE_TOKENS`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pyattacker._checks import check_whole
from pyattacker._inputs import loads, read_bounded
from pyattacker.errors import ConfigError

__all__ = [
    "MAX_SHAPE_TOKENS",
    "VOCABULARY",
    "JsonlPrompts",
    "Prompt",
    "PromptSource",
    "Shape",
    "SyntheticPrompts",
    "parse_shape",
]

_WORDS = """
    the of and to in is that for it as was with be by on not he this are or his from at
    which but have an had they you were their one all we can her has there been if more
    when will would who so no time people year way day man thing woman life child world
    school state family student group country problem hand part place case week company
    system program question work government number night point home water room mother area
    money story fact month lot right study book eye job word business issue side kind head
    house service friend father power hour game line end member law car city community name
    team minute kid body information back parent face level office door health person art
    war history party result change reason research girl air force education about after
    again also always any because before best better big both come could did different does
    down each even every few find first found give go good great help here high how just
    know large last left little long look made make many may me might much must my never
    new next now old only other our out over own put read said same say see should show
    small some still such take tell than them then these think three through too two under
    up us use very want well went what where while why young food road tree river sea sky
    sun light dark red blue green white black cold hot open close start stop run walk talk
    play music song paper letter table chair window street town market field bird fish
    horse dog cat bread fire stone wind rain winter spring early late fast slow easy hard
    simple clear full free true real sure ready happy strong short near far feel keep hold
    bring turn move live leave call ask need try mean let begin plan test build learn grow
"""
VOCABULARY: tuple[str, ...] = tuple(_WORDS.split())
"""Common English words, each a single token in OpenAI's BPE encodings (see above)."""

MAX_SHAPE_TOKENS = 2_000_000
"""The most tokens a synthetic prompt or an output cap may ask for: the largest context
window models offer (2M tokens). More cannot be served, so it is a typo, and a prompt
that size would take memory and time to build for nothing."""

_HEAD_WORDS = 16  # fresh words opening every synthetic prompt (see SyntheticPrompts)
_SHAPE_HINT = f"CONTEXT:MAX_TOKENS in tokens, each at most {MAX_SHAPE_TOKENS:,}, e.g. 1000:200"
_JSONL_KEYS = ("messages", "prompt", "max_tokens")
_JSONL_EXAMPLE = (
    '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64} '
    'or {"prompt": "Once upon a time"}'
)


@dataclass(frozen=True, slots=True)
class Prompt:
    """What one request asks: chat ``messages`` or a completions ``text`` (exactly one),
    and the ``max_tokens`` it wants (``None``: the sender's default).

    A text prompt also works for ``chat/completions`` (it becomes one user message);
    messages work only for ``chat/completions``.
    """

    text: str | None = None
    messages: tuple[Mapping[str, Any], ...] | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ConfigError(
                "a prompt needs either text or messages, not both or neither", field="prompt"
            )

    def __repr__(self) -> str:
        if self.text is not None:
            what = f"{len(self.text.split())} words"
        else:
            what = f"{len(self.messages or ())} messages"
        return f"<Prompt {what} max_tokens={self.max_tokens}>"


class PromptSource(Protocol):
    """Anything that gives the prompt of request ordinal ``n`` (deterministic in ``n``)."""

    def prompt(self, n: int) -> Prompt: ...


class Shape(NamedTuple):
    """``--shape CONTEXT:MAX_TOKENS``: prompt length and output cap, in tokens."""

    context_tokens: int
    max_tokens: int


def parse_shape(text: str) -> Shape:
    """``"1000:200"`` → ``Shape(1000, 200)``; :class:`ConfigError` (field ``shape``, or
    ``shape.context_tokens`` / ``shape.max_tokens``) unless both are whole numbers from 1
    to :data:`MAX_SHAPE_TOKENS`."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise ConfigError(
            f"expected CONTEXT:MAX_TOKENS, got {text!r}", field="shape", hint=_SHAPE_HINT
        )
    context, _, output = (part.strip() for part in text.partition(":"))
    if not (context.isascii() and context.isdigit() and output.isascii() and output.isdigit()):
        raise ConfigError(
            f"expected two whole numbers, got {text!r}", field="shape", hint=_SHAPE_HINT
        )
    return Shape(
        _token_count(int(context), "shape.context_tokens", _SHAPE_HINT, "CONTEXT"),
        _token_count(int(output), "shape.max_tokens", _SHAPE_HINT, "MAX_TOKENS"),
    )


def _token_count(value: object, field: str, hint: str, what: str | None = None) -> int:
    """``value`` if it is a whole number from 1 to :data:`MAX_SHAPE_TOKENS`; ``what``
    names it in the message (default: ``field``)."""
    count = check_whole(value, field, hint=hint)
    if count > MAX_SHAPE_TOKENS:
        raise ConfigError(
            f"{what or field} must be at most {MAX_SHAPE_TOKENS:,} tokens, got {count:,}",
            field=field,
            hint=hint,
        )
    return count


class SyntheticPrompts:
    """Prompts of exactly ``context_tokens`` vocabulary words, asking ``max_tokens``.

    Prompt ``n`` depends only on ``(seed, n)``: the same words in every process and every
    run. Making one is cheap whatever its length, because the event loop that makes it is
    the one timing the responses: the words are drawn once, on the first call, into one
    seeded text of ``context_tokens - 16`` words, and prompt ``n`` is 16 words drawn by
    ``random.Random(f"{seed}:{n}")`` followed by a rotation of that text starting at a word
    boundary the same generator picks (two string copies, no work per word).

    Each request thus opens with its own words (1 in 320**16 to repeat), so a server's
    prefix cache, which reuses only a common *start*, cannot make the load look lighter
    than it is; a rotation alone would repeat whole prompts once the requests outnumber
    the words. Prompts of 16 words or fewer are all drawn per request.

    Raises :class:`ConfigError` unless both counts are whole numbers from 1 to
    :data:`MAX_SHAPE_TOKENS` and ``seed`` is an int.
    """

    __slots__ = ("_ring", "_ring_length", "context_tokens", "max_tokens", "seed")

    def __init__(self, context_tokens: int, max_tokens: int, seed: int = 0) -> None:
        self.context_tokens = _token_count(context_tokens, "context_tokens", "e.g. 1000")
        self.max_tokens = _token_count(max_tokens, "max_tokens", "e.g. 200")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"must be an int, got {seed!r}", field="seed")
        self.seed = seed
        self._ring: str | None = None  # the shared text twice over: a rotation is one slice
        self._ring_length = 0  # the length of one copy

    @classmethod
    def from_shape(cls, shape: str | Shape, seed: int = 0) -> SyntheticPrompts:
        """From ``--shape`` text (``"1000:200"``) or a :class:`Shape`."""
        parsed = parse_shape(shape) if isinstance(shape, str) else shape
        return cls(parsed.context_tokens, parsed.max_tokens, seed)

    def prompt(self, n: int) -> Prompt:
        rng = random.Random(f"{self.seed}:{n}")
        head = " ".join(rng.choices(VOCABULARY, k=min(self.context_tokens, _HEAD_WORDS)))
        if self.context_tokens <= _HEAD_WORDS:
            return Prompt(text=head, max_tokens=self.max_tokens)
        ring, length = self._ring_text()
        # The word after the first space at or past a random character: the space that
        # joins the two copies is always there to find.
        start = ring.find(" ", rng.randrange(length)) + 1
        return Prompt(text=f"{head} {ring[start : start + length]}", max_tokens=self.max_tokens)

    def _ring_text(self) -> tuple[str, int]:
        if self._ring is None:
            words = random.Random(f"{self.seed}:rest").choices(
                VOCABULARY, k=self.context_tokens - _HEAD_WORDS
            )
            text = " ".join(words)
            self._ring, self._ring_length = f"{text} {text}", len(text)
        return self._ring, self._ring_length

    def __repr__(self) -> str:
        return (
            f"SyntheticPrompts(context_tokens={self.context_tokens}, "
            f"max_tokens={self.max_tokens}, seed={self.seed})"
        )


class JsonlPrompts:
    """Prompts from a JSON Lines file, used in order and cycled by request ordinal.

    Each non-blank line is one object: ``{"messages": [...]}`` (chat) or ``{"prompt":
    "..."}`` (completions), with an optional ``"max_tokens"``; any other key is refused
    (a misspelt ``max_token`` would otherwise be ignored in silence). The whole file is
    read and checked at construction: a bad line is a :class:`ConfigError` whose field is
    ``PATH:LINE`` and whose hint is the fix.
    """

    __slots__ = ("_prompts", "path")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            text = read_bounded(self.path, "--prompts").decode("utf-8")
        except ConfigError as exc:  # named by its flag: the CLI renames "prompts" to it
            raise ConfigError(exc.message, field="prompts", hint=exc.hint) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"cannot read the prompts file: {exc}",
                field="prompts",
                hint="a UTF-8 JSON Lines file, one prompt per line",
            ) from None
        self._prompts = tuple(
            _prompt_of_line(line, f"{self.path}:{number}")
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip()
        )
        if not self._prompts:
            raise ConfigError(
                "the prompts file has no prompts", field=str(self.path), hint=_JSONL_EXAMPLE
            )

    def __len__(self) -> int:
        return len(self._prompts)

    def prompt(self, n: int) -> Prompt:
        return self._prompts[n % len(self._prompts)]

    @property
    def has_messages(self) -> bool:
        """Whether any line is a chat prompt (which ``completions`` cannot send)."""
        return any(p.messages is not None for p in self._prompts)

    def __repr__(self) -> str:
        return f"JsonlPrompts({str(self.path)!r}, {len(self._prompts)} prompts)"


def _prompt_of_line(line: str, where: str) -> Prompt:
    try:
        item = loads(line, where)
    except ValueError as exc:
        raise ConfigError(
            f"not valid JSON ({exc})",
            field=where,
            hint=f"one JSON object per line: {_JSONL_EXAMPLE}",
        ) from None
    if not isinstance(item, dict):
        raise ConfigError(
            f"expected a JSON object, got {type(item).__name__}", field=where, hint=_JSONL_EXAMPLE
        )
    unknown = sorted(set(item) - set(_JSONL_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r}",
            field=where,
            hint=f"use only {', '.join(_JSONL_KEYS)}",
        )
    max_tokens = item.get("max_tokens")
    if max_tokens is not None:
        hint = f"1 to {MAX_SHAPE_TOKENS:,} tokens"
        _token_count(max_tokens, f"{where}: max_tokens", hint, "max_tokens")
    has_messages, has_prompt = "messages" in item, "prompt" in item
    if has_messages == has_prompt:
        raise ConfigError(
            "needs exactly one of 'messages' and 'prompt'", field=where, hint=_JSONL_EXAMPLE
        )
    if has_prompt:
        if not isinstance(item["prompt"], str) or not item["prompt"]:
            raise ConfigError("'prompt' must be a non-empty string", field=where)
        return Prompt(text=item["prompt"], max_tokens=max_tokens)
    return Prompt(messages=_messages(item["messages"], where), max_tokens=max_tokens)


def _messages(value: object, where: str) -> tuple[Mapping[str, Any], ...]:
    hint = 'a list like [{"role": "user", "content": "Hi"}]'
    if not isinstance(value, list) or not value:
        raise ConfigError("'messages' must be a non-empty list", field=where, hint=hint)
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ConfigError(
                f"messages[{i}] must be an object with a 'role' string", field=where, hint=hint
            )
        if "content" not in message:
            raise ConfigError(f"messages[{i}] has no 'content'", field=where, hint=hint)
    return tuple(value)
