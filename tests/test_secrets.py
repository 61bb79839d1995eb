"""Secrets are masked in structures and scrubbed from relayed messages."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pyattacker._secrets import MASK, mask, scrub, secret_values

TEXT = st.characters(blacklist_characters="*")  # real keys never contain the mask character
KEYS = st.sampled_from(["api_key", "Authorization", "token", "model", "region", "password"])
VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.text(TEXT, min_size=1, max_size=12), st.integers(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


def leaves_under_secret_keys(value: Any, secret: bool = False) -> list[Any]:
    if isinstance(value, dict):
        return [
            leaf
            for k, v in value.items()
            for leaf in leaves_under_secret_keys(v, secret or k.lower() in SECRET_KEYS)
        ]
    if isinstance(value, list):
        return [leaf for v in value for leaf in leaves_under_secret_keys(v, secret)]
    return [value] if secret else []


SECRET_KEYS = {"api_key", "authorization", "token", "password"}


@given(st.dictionaries(KEYS, VALUES, max_size=4))
def test_mask_leaves_nothing_under_a_secret_key_and_never_mutates(options: dict[str, Any]) -> None:
    before = repr(options)
    masked = mask(options)
    assert repr(options) == before
    assert all(leaf == MASK for leaf in leaves_under_secret_keys(masked))


@given(st.dictionaries(KEYS, VALUES, max_size=4), st.text(TEXT, max_size=20))
def test_scrub_removes_every_secret_string_from_a_message(
    options: dict[str, Any], noise: str
) -> None:
    secrets = secret_values(options)
    message = noise + " ".join(sorted(secrets)) + noise
    cleaned = scrub(message, secrets)
    assert not any(s in cleaned for s in secrets)


def test_secret_looking_keys_are_matched_case_insensitively_at_any_depth() -> None:
    options = {"headers": {"X-Api-Key": "k1", "Accept": "json"}, "auth": [{"TOKEN": "t1"}]}
    assert mask(options) == {
        "headers": {"X-Api-Key": MASK, "Accept": "json"},
        "auth": [{"TOKEN": MASK}],
    }
    assert secret_values(options) == {"k1", "t1"}
