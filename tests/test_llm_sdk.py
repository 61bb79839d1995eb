"""The ``openai`` SDK helpers: clients without hidden retries, and a loud warning."""

from __future__ import annotations

import sys
from collections.abc import Callable
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
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.retry import Retrying
from pyattacker.run import pipeline, task
from pyattacker.store import MemoryStore, RowKind
from run_helpers import rows, run_virtually, runner

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


# -- the Runner checks the clients its tasks lease, against each task's own policy ---------


def sdk_pool(make_client: Callable[[Resource], object]) -> Pool:
    resource = Resource.create("openai", id="key-1", options={"api_key": KEY}, factory=make_client)
    return Pool("llm", [resource])


def retrying_client(resource: Resource) -> object:
    key = resource.options["api_key"]
    return openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=key, max_retries=2)


@task
async def ask(n: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:  # leases the client; sends nothing
        assert lease.client is not None
    return n


@task(retry="exponential")
async def ask_with_retries(n: int, ctx: TaskContext) -> int:
    return await ask.fn(n, ctx)


def hidden_retry_events(store: MemoryStore) -> list[dict[str, object]]:
    return [row["data"] for row in rows(store, RowKind.EVENTS, kind="resource.hidden_retries")]


def retries_off_events(store: MemoryStore) -> list[dict[str, object]]:
    return [row["data"] for row in rows(store, RowKind.EVENTS, kind="resource.retries_off")]


@task
async def client_retries(n: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:
        return int(getattr(lease.client, "max_retries", -1))


def test_a_lease_hands_out_an_openai_client_with_its_retries_turned_off_and_says_so() -> None:
    store = MemoryStore()
    pool = sdk_pool(retrying_client)
    report = run_virtually(runner(store, pools=[pool]), pipeline("p", client_retries).map(range(5)))
    assert report.by_state == {"succeeded": 5}  # and no warning: warnings are errors here
    (event,) = retries_off_events(store)
    assert {k: event[k] for k in ("pool", "resource", "client", "max_retries")} == {
        "pool": "llm",
        "resource": "key-1",
        "client": "AsyncOpenAI",
        "max_retries": 2,
    }
    assert getattr(pool.client_of("key-1"), "max_retries", None) == 0
    assert hidden_retry_events(store) == []


def test_the_sdks_default_retries_are_turned_off_whatever_the_tasks_policy() -> None:
    store = MemoryStore()
    pool = sdk_pool(lambda r: openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY))
    assert pool.client_of("key-1") is None  # built on the first lease, not before
    run_virtually(runner(store, pools=[pool]), pipeline("p", ask_with_retries).map(range(3)))
    (event,) = retries_off_events(store)
    assert event["max_retries"] == 2
    assert hidden_retry_events(store) == []


class _StubbornClient:
    """Looks like a vendor's client that cannot be told to stop retrying."""

    max_retries = 2


_StubbornClient.__module__ = "openai._stub"


def test_a_vendor_client_whose_retries_cannot_be_turned_off_is_refused() -> None:
    pool = sdk_pool(lambda r: _StubbornClient())
    with pytest.raises(ConfigError, match="retries on its own") as caught:
        pool.try_acquire()
    assert caught.value.field == "resources.key-1.factory"
    assert pool.active == 0


@pytest.mark.parametrize(
    "make_client",
    [
        lambda r: openai_client("http://127.0.0.1:9/v1", KEY),
        lambda r: openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY).with_options(
            max_retries=0
        ),
        lambda r: SimpleNamespace(max_retries=5),  # not the SDK's: its retries are its own
        None,  # the lease hands out the resource itself
    ],
    ids=["openai_client", "with_options", "not-openai", "no-factory"],
)
def test_a_run_whose_clients_do_not_retry_on_their_own_is_quiet(
    make_client: Callable[[Resource], object] | None,
) -> None:
    store = MemoryStore()
    pool = Pool("llm", [Resource.create("openai", id="key-1", factory=make_client)])
    report = run_virtually(runner(store, pools=[pool]), pipeline("p", ask).map(range(3)))
    assert report.by_state == {"succeeded": 3}  # warnings are errors here
    assert hidden_retry_events(store) == []
