"""Secrets are masked in structures and scrubbed from relayed messages."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pyattacker._secrets import MASK, mask, mask_url, scrub, secret_values

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


# --- secrets in a URL's query ---------------------------------------------------------------

PARAMS = ["key", "api-key", "api_key", "token", "access_token", "sig", "signature", "password"]
PARAMS += ["secret", "X-Amz-Signature", "client_secret", "api%5Fkey", "auth"]


@given(
    name=st.sampled_from(PARAMS),
    value=st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.~%/+", min_size=1, max_size=30),
    before=st.sampled_from(["", "q=1&", "a=b;"]),
    after=st.sampled_from(["", "&page=2", "#frag", "' failed", " (url)"]),
)
def test_mask_url_hides_every_secret_looking_query_value(
    name: str, value: str, before: str, after: str
) -> None:
    text = f"cannot reach 'https://api.example.com/v1?{before}{name}={value}{after}"
    masked = mask_url(text)
    assert masked == f"cannot reach 'https://api.example.com/v1?{before}{name}={MASK}{after}"


def test_mask_url_leaves_other_parameters_and_texts_alone() -> None:
    for text in ["http://h/a?q=1&page=2", "http://h/?key=", "no url here", "x=1 y=2"]:
        assert mask_url(text) == text
