"""The ``openai`` SDK helpers: clients without hidden retries, and a loud warning."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from llm_helpers import KEY
from pyattacker.errors import ConfigError
from pyattacker.llm import (
    HiddenRetriesWarning,
    azure_openai_client,
    check_no_hidden_retries,
    openai_client,
)
from pyattacker.retry import Retrying

openai = pytest.importorskip("openai")


def test_the_openai_client_is_built_with_its_own_retries_off() -> None:
    client = openai_client("http://127.0.0.1:9/v1", KEY, timeout=5.0)
    assert isinstance(client, openai.AsyncOpenAI)
    assert client.max_retries == 0
    assert str(client.base_url).startswith("http://127.0.0.1:9/v1")
    assert KEY not in repr(client)
    assert openai_client("http://127.0.0.1:9/v1", KEY, max_retries=0).max_retries == 0


def test_the_azure_client_is_built_with_its_own_retries_off() -> None:
    client = azure_openai_client("https://res.openai.azure.com", KEY, api_version="2024-10-21")
    assert isinstance(client, openai.AsyncAzureOpenAI)
    assert client.max_retries == 0


@pytest.mark.parametrize("retries", [1, 2, True])
def test_asking_a_factory_for_sdk_retries_is_a_config_error(retries: object) -> None:
    with pytest.raises(ConfigError, match="max_retries") as caught:
        openai_client("http://127.0.0.1:9/v1", KEY, max_retries=retries)
    assert "retry policy" in str(caught.value)
    with pytest.raises(ConfigError, match="max_retries"):
        azure_openai_client("https://r.openai.azure.com", KEY, api_version="v", max_retries=retries)


def test_without_the_openai_package_the_error_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(ConfigError) as caught:
        openai_client("http://127.0.0.1:9/v1", KEY)
    assert "pip install 'pyattacker[openai]'" in str(caught.value)


def test_a_client_that_retries_while_the_policy_says_none_is_warned_about_loudly() -> None:
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY)  # SDK default: 2
    with pytest.warns(
        HiddenRetriesWarning, match=r"max_retries=2\) while the retry policy says none"
    ) as caught:
        assert check_no_hidden_retries(client, Retrying()) is False
    text = str(caught[0].message)
    assert "max_retries=0" in text
    assert KEY not in text
    assert issubclass(HiddenRetriesWarning, UserWarning)


def test_sdk_retries_under_a_retrying_policy_are_reported_too() -> None:
    with pytest.warns(HiddenRetriesWarning, match="undercounted"):
        assert not check_no_hidden_retries(SimpleNamespace(max_retries=3), "exponential")


@pytest.mark.parametrize(
    "client", [SimpleNamespace(max_retries=0), object(), SimpleNamespace(max_retries="2")]
)
def test_a_client_without_retries_passes_quietly(client: object) -> None:
    assert check_no_hidden_retries(client, Retrying()) is True  # warnings are errors here
    built = openai_client("http://127.0.0.1:9/v1", KEY)
    assert check_no_hidden_retries(built, "none") is True
