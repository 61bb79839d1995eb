"""Attacks on real endpoints: TLS (verification, --cacert, --insecure, client certificates),
redirects (counted as such, followed hop by hop), and the per-attempt timing breakdown.

The servers are the echo server with a TLS context made from a throwaway certificate
authority (``trustme``), on loopback ports the OS picks.
"""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, AttackResult, OpenModel, attack
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError, RedirectError
from pyattacker.http import URL, TlsOptions
from pyattacker.measure import SAMPLE_COLUMNS, Attempt, OkBatch, Outcome, Phases, RequestRecord
from pyattacker.servers import EchoServer, EchoServerProcess, server_tls


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    files = {name: folder / f"{name}.pem" for name in ("ca", "server", "client")}
    ca.cert_pem.write_to_path(str(files["ca"]))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(files["server"]))
    client = ca.issue_cert("client@example.org")
    client.private_key_and_cert_chain_pem.write_to_path(str(files["client"]))
    return files


def _attack_tls(
    pki: dict[str, Path], tls: TlsOptions | None, *, client_ca: bool = False, requests: int = 20
) -> tuple[AttackResult, dict[str, object]]:
    async def main() -> tuple[AttackResult, dict[str, object]]:
        context = server_tls(str(pki["server"]), client_ca=str(pki["ca"]) if client_ca else None)
        async with EchoServer(ssl=context) as server:
            assert server.url.startswith("https://")
            plan = AttackPlan.build([server.url], OpenModel(rate=200), requests=requests, tls=tls)
            result = await attack(plan)
            return result, server.stats()

    return asyncio.run(main())


def test_an_untrusted_certificate_fails_every_request_as_tls_naming_the_fix(
    pki: dict[str, Path],
) -> None:
    result, served = _attack_tls(pki, None)  # the system's CAs do not know ours
    assert result.total.by_outcome["failed"] == 20
    assert dict(result.total.by_error_class) == {"tls": 20}
    assert served["count"] == 0
    (group,) = result.errors
    assert group.example is not None
    assert "--cacert FILE" in group.example
    assert "--insecure" in group.example


def test_cacert_verifies_and_the_timing_shows_each_new_connections_connect_and_handshake(
    pki: dict[str, Path],
) -> None:
    result, served = _attack_tls(pki, TlsOptions(cacert=str(pki["ca"])))
    assert result.total.by_outcome["ok"] == 20 == served["count"]
    phases = result.phases
    assert phases is not None
    assert phases.connections >= 1
    assert phases.connect.count == phases.tls.count == phases.connections
    assert phases.waiting.count == phases.blocked.count == phases.receiving.count == 20
    report = result.to_dict()
    assert report["timing"]["connections"] == phases.connections
    assert report["plan"]["tls"]["cacert"] == str(pki["ca"])


def test_insecure_skips_verification(pki: dict[str, Path]) -> None:
    result, served = _attack_tls(pki, TlsOptions(insecure=True))
    assert result.total.by_outcome["ok"] == 20 == served["count"]


def test_a_server_that_requires_a_client_certificate_gets_it_from_cert(
    pki: dict[str, Path],
) -> None:
    without, _ = _attack_tls(pki, TlsOptions(cacert=str(pki["ca"])), client_ca=True)
    assert without.total.by_outcome["failed"] == 20
    assert set(without.total.by_error_class) <= {"tls", "connection"}
    with_cert, served = _attack_tls(
        pki, TlsOptions(cacert=str(pki["ca"]), cert=str(pki["client"])), client_ca=True
    )
    assert with_cert.total.by_outcome["ok"] == 20 == served["count"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--cacert", "missing.pem"], "--cacert"),
        (["--cert", "missing.pem"], "--cert"),
        (["--cert", "{ca}", "--cert-key", "missing.pem"], "--cert-key"),
        (["--cert-key", "{client}"], "--cert-key"),
        (["--cert", "{ca}"], "--cert"),  # a CA certificate has no key with it
        (["--insecure", "--cacert", "{ca}"], "--cacert"),
        (["--follow-redirects", "-1"], "--follow-redirects"),
    ],
)
def test_bad_tls_and_redirect_flags_exit_2_naming_the_flag(
    flags: list[str],
    named: str,
    pki: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    given_flags = [
        f.replace("{ca}", str(pki["ca"])).replace("{client}", str(pki["client"])) for f in flags
    ]
    argv = ["attack", "https://127.0.0.1:9/", "--requests", "1", "--rate", "1/s", *given_flags]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {named}" in err, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_follow_redirects_is_refused_for_an_llm_attack() -> None:
    with pytest.raises(ConfigError) as info:
        AttackPlan.build(
            ["http://127.0.0.1:9/v1"],
            OpenModel(rate=1),
            requests=1,
            follow_redirects=2,
            llm=_llm_spec(),
        )
    assert info.value.field == "follow_redirects"


def _llm_spec() -> object:
    from pyattacker.attack import LlmSpec
    from pyattacker.llm import SyntheticPrompts

    return LlmSpec(model="m", prompts=SyntheticPrompts(context_tokens=10, max_tokens=5))


# -- redirects --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


def test_an_unfollowed_redirect_is_a_failed_request_of_class_redirect_and_exits_1(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    out = tmp_path / "r.json"
    url = f"{echo.url}/redirect?to=/elsewhere&code=301"
    assert (
        run_cli(["attack", url, "--rate", "100/s", "--requests", "30", "-q", "--json", str(out)])
        == 1
    )
    report = json.loads(out.read_text())
    assert report["total"]["outcomes"] == {"failed": 30}
    assert report["total"]["error_classes"] == {"redirect": 30}
    assert report["total"]["status"] == {"301": 30}
    assert echo.stats()["statuses"] == {"301": 30}
    assert "redirect to /elsewhere" in report["errors"][0]["example"]


def test_followed_redirects_count_each_hop_as_an_attempt_as_the_server_counts_them(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    out, rows = tmp_path / "r.json", tmp_path / "rows.csv"
    # two hops: /redirect -> /redirect -> /final (same origin), POST turned GET by the 303
    second = "/redirect%3Fto%3D/final%26code%3D307"
    url = f"{echo.url}/redirect?to={second}&code=303"
    argv = ["attack", url, "-X", "POST", "--body", "x", "--rate", "100/s", "--requests", "40"]
    argv += ["-q", "--follow-redirects", "3", "--json", str(out), "--samples", str(rows)]
    assert run_cli(argv) == 0
    report = json.loads(out.read_text())
    served = echo.stats()
    assert report["total"]["outcomes"] == {"ok": 40}
    assert report["total"]["attempts"] == 120 == served["count"]
    assert report["total"]["attempts_per_request"] == {"3": 40}
    assert served["statuses"] == {"200": 40, "303": 40, "307": 40}
    assert report["timing"]["waiting"]["count"] == 120
    with rows.open() as f:
        samples = list(csv.DictReader(f))
    assert {row["attempts"] for row in samples} == {"3"}


def test_too_many_redirects_end_the_request_as_a_redirect(echo: EchoServerProcess) -> None:
    echo.reset()
    url = f"{echo.url}/redirect?to=/redirect&code=302"  # /redirect alone points to / : 2 hops
    plan = AttackPlan.build([url], OpenModel(rate=100), requests=10, follow_redirects=1)
    result = asyncio.run(attack(plan))
    assert dict(result.total.by_error_class) == {"redirect": 10}
    assert result.total.attempts == 20 == echo.stats()["count"]


def test_a_redirect_to_another_origin_drops_credential_headers_and_turns_post_into_get() -> None:
    from pyattacker.attack._plan import Target
    from pyattacker.attack._redirects import Hop, next_hop

    headers = (("Authorization", "Bearer sk-1"), ("Accept", "text/plain"))
    hop = Hop(Target("t", URL.parse("http://a.test/x?y=1"), headers), "POST", b"body")

    def error(status: int, location: str) -> RedirectError:
        return RedirectError("r", status=status, location=location)

    same = next_hop(error(307, "/z"), hop)
    assert same is not None
    assert (str(same.target.url), same.method, same.body) == ("http://a.test/z", "POST", b"body")
    assert same.target.headers == headers
    other = next_hop(error(302, "https://b.test:8443/w"), hop)
    assert other is not None
    assert (str(other.target.url), other.method, other.body) == (
        "https://b.test:8443/w",
        "GET",
        None,
    )
    assert other.target.headers == (("Accept", "text/plain"),)
    assert next_hop(error(301, "ftp://c.test/"), hop) is None  # not a URL we can send to


# -- the timing breakdown ----------------------------------------------------------------

_times = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@st.composite
def plain_ok(draw: st.DrawFn) -> Attempt:
    scheduled = draw(_times)
    sent = scheduled + draw(_times)
    first = sent + draw(_times)
    end = first + draw(_times)
    return Attempt(
        request=0, attempt=1, scheduled=scheduled, sent=sent, first_byte=first, end=end,
        outcome=Outcome.OK, status=200,
    )  # fmt: skip


@given(st.lists(plain_ok(), min_size=1, max_size=40))
def test_phases_of_a_batch_of_ok_answers_equal_the_phases_added_one_by_one(
    attempts: list[Attempt],
) -> None:
    alone, batched = Phases(), Phases()
    for attempt in attempts:
        alone.add_attempt(attempt)
    batched.add_ok_batch(OkBatch(attempts))
    for name in ("blocked", "waiting", "receiving"):
        a, b = getattr(alone, name), getattr(batched, name)
        assert a.count == b.count == len(attempts)
        assert a.max == pytest.approx(b.max, abs=1e-6)


def test_a_new_connections_setup_is_its_own_phase_not_blocked_time() -> None:
    attempt = Attempt(
        request=1, attempt=1, scheduled=10.0, sent=10.5, first_byte=10.7, end=10.75,
        outcome=Outcome.OK, status=200, connect=0.1, tls=0.3,
    )  # fmt: skip
    assert attempt.dispatch_delay == pytest.approx(0.5)
    assert attempt.blocked == pytest.approx(0.1)
    assert attempt.waiting == pytest.approx(0.2)
    assert attempt.receiving == pytest.approx(0.05)
    phases = Phases()
    phases.add_attempt(attempt)
    assert phases.connections == 1
    assert phases.blocked.max == pytest.approx(0.1, abs=1e-6)
    row = RequestRecord.from_attempts([attempt]).to_dict()
    assert list(row) == list(SAMPLE_COLUMNS)
    assert row["connect"] == pytest.approx(0.1)
    assert row["tls"] == pytest.approx(0.3)


def test_the_text_report_has_a_timing_section(pki: dict[str, Path]) -> None:
    from pyattacker.report import attack_markdown, attack_text

    result, _ = _attack_tls(pki, TlsOptions(insecure=True), requests=5)
    text = attack_text(result)
    assert "Timing (ms)" in text
    for phase in ("blocked", "connect", "tls", "waiting", "receiving"):
        assert f"\n{phase} " in text
    assert "## Timing (ms)" in attack_markdown(result)


def test_the_echo_servers_tls_context_refuses_a_missing_certificate(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        server_tls(str(tmp_path / "none.pem"))
    assert info.value.field == "tls_cert"


def test_an_llm_attack_speaks_tls_with_the_same_options_and_times_the_handshake(
    pki: dict[str, Path],
) -> None:
    from pyattacker.attack import LlmSpec
    from pyattacker.llm import SyntheticPrompts
    from pyattacker.servers import LlmServer

    async def main() -> tuple[AttackResult, dict[str, object]]:
        context = server_tls(str(pki["server"]))
        async with LlmServer(ssl=context, ttft="fixed:5ms", itl="fixed:1ms", output_tokens=5) as s:
            spec = LlmSpec(model="mock-llm", prompts=SyntheticPrompts(20, 5))
            tls = TlsOptions(cacert=str(pki["ca"]))
            plan = AttackPlan.build(
                [f"{s.url}/v1"], OpenModel(rate=50), requests=10, tls=tls, llm=spec
            )
            return await attack(plan), s.stats()

    result, served = asyncio.run(main())
    assert result.total.by_outcome["ok"] == 10 == served["requests"]
    assert result.total.ttft.count == 10
    assert result.phases is not None
    assert result.phases.tls.count == result.phases.connections >= 1
