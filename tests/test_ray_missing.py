"""A Ray path refuses what cannot work at once, exit 2 and nothing written: Ray not
installed (``pyattacker[ray]`` not taken: the install command), a cluster address nobody
answers at or where something other than a Ray head answers (in seconds, where Ray itself
would retry for minutes), a task shape that cannot leave the Runner; and nothing else ever
loads Ray."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyattacker._ray import check_address
from pyattacker.cli import run_cli
from pyattacker.errors import ConfigError
from pyattacker.run import task

# a bench sweep small enough to be refused or run in a moment
SMALL_BENCH = ["--algorithms", "wait", "--seeds", "1", "--jobs", "10", "--horizon", "10"]


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError


def square(x: int) -> int:
    return x * x


@pytest.mark.usefixtures("no_ray")
def test_a_ray_task_without_ray_is_refused_when_decorated_with_the_install_command() -> None:
    with pytest.raises(ConfigError, match=r"needs Ray") as caught:
        task(square, executor="ray")
    assert caught.value.hint == "pip install 'pyattacker[ray]'"
    assert task(square).executor == "local"  # the default never asks for Ray


@pytest.mark.usefixtures("no_ray")
def test_bench_ray_without_ray_exits_2_naming_the_flag_and_the_install_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    code = run_cli(["bench", *SMALL_BENCH, "--ray", "--json", str(report)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--ray" in err
    assert "pip install 'pyattacker[ray]'" in err
    assert not report.exists()


def test_an_unknown_executor_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown executor 'dask'") as caught:
        task(square, executor="dask")
    assert caught.value.hint == "one of: local, ray"


def test_a_ray_task_that_takes_ctx_is_refused_as_ctx_stays_in_the_runner() -> None:
    pytest.importorskip("ray")

    def leases(x: int, ctx: object) -> int:
        return x

    with pytest.raises(ConfigError, match="takes a ctx"):
        task(leases, executor="ray")


def test_importing_pyattacker_and_running_bench_never_loads_ray() -> None:
    code = (
        "import sys, pyattacker.run, pyattacker.benchmark, pyattacker.cli; "
        "from pyattacker.run import task; task(len); "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bench_ray_at_an_address_nobody_listens_on_exits_2_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("ray")
    code = run_cli(["bench", *SMALL_BENCH, "--ray", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no Ray cluster answers at 127.0.0.1:1" in err
    assert "ray start --head" in err


@pytest.mark.parametrize(("workers", "noted"), [([], True), (["--workers", "2"], False)])
def test_ray_on_one_worker_says_that_workers_spread_it(
    capsys: pytest.CaptureFixture[str], workers: list[str], noted: bool
) -> None:
    pytest.importorskip("ray")
    args = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "4", *workers]
    assert run_cli([*args, "--ray", "127.0.0.1:1"]) == 2  # (nobody answers there)
    err = capsys.readouterr().err
    assert ("note: --ray runs the plan on one actor: give --workers N" in err) is noted


@pytest.mark.usefixtures("no_ray")
def test_attack_ray_without_ray_exits_2_naming_the_flag_and_the_install_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    args = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "4", "--quiet"]
    code = run_cli([*args, "--workers", "2", "--json", str(report), "--ray"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--ray" in err
    assert "pip install 'pyattacker[ray]'" in err
    assert not report.exists()


# ---- an address where something listens, but not a Ray head


def _http_server(conn: socket.socket) -> None:
    conn.recv(4096)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    conn.close()


def _byte_echo(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(conn.recv(4096))


def _hangs_up(conn: socket.socket) -> None:
    conn.close()


def _says_nothing(conn: socket.socket) -> None:
    pass  # keeps the connection open, reads nothing, answers nothing


def _http2_server(conn: socket.socket) -> None:
    """Answers as a gRPC server (a Ray head's GCS) does: its SETTINGS frame first."""
    conn.recv(4096)
    one_setting = (3).to_bytes(2, "big") + (100).to_bytes(4, "big")  # MAX_CONCURRENT_STREAMS
    conn.sendall(len(one_setting).to_bytes(3, "big") + b"\x04\x00\x00\x00\x00\x00" + one_setting)


@contextlib.contextmanager
def listening(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 handing each connection to ``answer``; its host:port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        server.close()
        for conn in accepted:
            conn.close()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_http_server, "it answered 'HTTP/1.1 400 Bad Request'"),
        (_byte_echo, "it answered 'PRI * HTTP/2.0'"),
        (_hangs_up, "it closed the connection"),
        (_says_nothing, "it said nothing within 2s"),
    ],
)
def test_an_address_where_something_else_listens_is_refused_in_seconds_saying_what_it_did(
    answer: Callable[[socket.socket], None], said: str
) -> None:
    with listening(answer) as address:
        started = time.monotonic()
        with pytest.raises(ConfigError, match="but not a Ray cluster") as caught:
            check_address(address, "--ray")
        took = time.monotonic() - started
    assert said in caught.value.message
    assert caught.value.field == "--ray"
    assert "ray start --head" in (caught.value.hint or "")
    assert took < 3.5


def test_an_address_that_answers_as_http2_as_a_ray_head_does_is_accepted() -> None:
    with listening(_http2_server) as address:
        check_address(address, "--ray")  # no error: Ray's own connect takes it from here


@pytest.mark.timeout(30)
@pytest.mark.parametrize("answer", [_http_server, _says_nothing])
def test_attack_ray_at_a_web_server_exits_2_in_seconds_naming_the_flag(
    answer: Callable[[socket.socket], None], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    report = tmp_path / "report.json"
    args = ["attack", "http://127.0.0.1:9/", "--rate", "10/s", "--requests", "4", "--quiet"]
    with listening(answer) as address:
        started = time.monotonic()
        code = run_cli([*args, "--workers", "2", "--json", str(report), "--ray", address])
        took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2
    assert f"--ray: something answers at {address}, but not a Ray cluster" in err
    assert "Traceback" not in err
    assert not report.exists()
    assert took < 5


@pytest.mark.timeout(30)
def test_bench_ray_at_a_web_server_exits_2_in_seconds_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("ray")
    with listening(_http_server) as address:
        code = run_cli(["bench", *SMALL_BENCH, "--ray", address])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--ray: something answers at {address}, but not a Ray cluster" in err


@pytest.mark.timeout(30)
def test_run_with_a_ray_task_and_ray_address_at_a_web_server_exits_2_writing_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    config, store = _ray_config(tmp_path)
    with listening(_http_server) as address:
        monkeypatch.setenv("RAY_ADDRESS", address)
        code = run_cli(["run", "-c", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"RAY_ADDRESS: something answers at {address}, but not a Ray cluster" in err
    assert not store.exists()


def test_run_with_only_local_tasks_never_looks_at_ray_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "r.yaml"
    config.write_text(
        f"run: {{store: {tmp_path / 'r.db'}}}\n"
        "pipeline: {name: r, tasks: [{use: echo}]}\n"
        "source: {range: 2}\n"
    )
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nobody there, and no task needs it
    assert run_cli(["run", "-c", str(config), "--json"]) == 0


# ---- RAY_ADDRESS for a run: checked, and the cluster connected to, before the store exists


def _ray_config(tmp_path: Path) -> tuple[Path, Path]:
    """A config whose one step runs on Ray, and the store it names (not created yet)."""
    store = tmp_path / "r.db"
    config = tmp_path / "r.yaml"
    config.write_text(
        f"run: {{store: {store}}}\n"
        "pipeline: {name: r, tasks: [{use: echo, executor: ray}]}\n"
        "source: {range: 3}\n"
    )
    return config, store


@pytest.mark.parametrize("address", ["bogus", "host:", "host:port", "::1:6379", "10.0.0.5:6379/x"])
def test_run_with_a_ray_address_of_another_form_exits_2_naming_it_writing_nothing(
    address: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    config, store = _ray_config(tmp_path)
    monkeypatch.setenv("RAY_ADDRESS", address)
    code = run_cli(["run", "-c", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"RAY_ADDRESS: {address!r} is not a Ray cluster's address" in err
    assert "HOST:PORT" in err
    assert not store.exists()


def test_bench_ray_names_ray_address_for_an_address_that_came_from_there(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "bogus")
    code = run_cli(["bench", *SMALL_BENCH, "--ray"])
    err = capsys.readouterr().err
    assert code == 2
    assert "RAY_ADDRESS: 'bogus' is not a Ray cluster's address" in err
    assert "--ray:" not in err
    assert "unset RAY_ADDRESS" in err  # the fix for a variable, not "pass the address"


class _RefusingGcsClient:
    """Ray's GCS client as a head with token authentication answers a driver without the
    token (``AuthenticationError`` at once); ``tests/test_ray.py`` meets the real one."""

    @staticmethod
    def standalone(address: str, cluster_id: object, timeout_ms: int) -> object:
        import ray.exceptions

        raise ray.exceptions.AuthenticationError(
            "RPC error: InvalidAuthToken: Authentication token is missing or incorrect"
        )


#: What Ray's C++ GCS client logs to file descriptor 2 as it meets a head's refusal.
_RAY_WARNING = "gcs_client.cc:210: Failed to get cluster ID from GCS server: Unauthenticated"


class _LoggingGcsClient:
    """A GCS client that logs to descriptor 2, as Ray's C++ does, then refuses the token
    (``refuse``) or answers."""

    refuse = True

    @classmethod
    def standalone(cls, address: str, cluster_id: object, timeout_ms: int) -> object:
        import ray.exceptions

        os.write(2, f"[W] {_RAY_WARNING}\n".encode())
        if cls.refuse:
            raise ray.exceptions.AuthenticationError("RPC error: InvalidAuthToken")
        return object()


class _AcceptingGcsClient:
    @staticmethod
    def standalone(address: str, cluster_id: object, timeout_ms: int) -> object:
        return object()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("mode", "field", "fix"),
    [
        (None, "RAY_AUTH_MODE", "export RAY_AUTH_MODE=token"),
        ("token", "RAY_AUTH_TOKEN", "export RAY_AUTH_TOKEN=TOKEN"),
    ],
)
def test_run_at_a_head_that_refuses_the_token_exits_2_naming_the_variable_writing_nothing(
    mode: str | None,
    field: str,
    fix: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    import ray._raylet

    monkeypatch.setattr(ray._raylet, "InnerGcsClient", _RefusingGcsClient)
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    config, store = _ray_config(tmp_path)
    with listening(_http2_server) as address:
        monkeypatch.setenv("RAY_ADDRESS", address)
        code = run_cli(["run", "-c", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{field}: the Ray cluster at {address} (RAY_ADDRESS)" in err
    assert fix in err
    assert "ray start --head" not in err  # the cluster is up: starting one is not the fix
    assert "Traceback" not in err
    assert not store.exists()


@pytest.mark.timeout(60)
def test_bench_ray_at_a_head_that_refuses_the_token_exits_2_naming_ray_auth_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    import ray._raylet

    monkeypatch.setattr(ray._raylet, "InnerGcsClient", _RefusingGcsClient)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with listening(_http2_server) as address:
        code = run_cli(["bench", *SMALL_BENCH, "--ray", address])
    err = capsys.readouterr().err
    assert code == 2
    assert f"RAY_AUTH_MODE: the Ray cluster at {address} (--ray)" in err


@pytest.mark.timeout(60)
def test_run_connects_to_the_ray_address_cluster_once_before_the_store_is_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever Ray refuses past the checks (a cluster of another Ray version, say) is one
    exit 2 with nothing written, not one failed item per row; the head is probed once."""
    pytest.importorskip("ray")
    import ray._raylet

    from pyattacker import _ray as pyattacker_ray

    inits: list[str | None] = []
    probes: list[str] = []
    probe = pyattacker_ray._not_grpc

    def init(address: str | None = None, **_options: object) -> None:
        inits.append(address)
        raise RuntimeError("versions differ")

    def counted(sock: socket.socket, timeout: float = pyattacker_ray.PROBE_TIMEOUT_S) -> str | None:
        probes.append(str(sock.getpeername()))
        return probe(sock, timeout)

    monkeypatch.setattr(ray._raylet, "InnerGcsClient", _AcceptingGcsClient)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(pyattacker_ray, "_not_grpc", counted)
    config, store = _ray_config(tmp_path)
    with listening(_http2_server) as address:
        monkeypatch.setenv("RAY_ADDRESS", address)
        code = run_cli(["run", "-c", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"RAY_ADDRESS: cannot connect to the Ray cluster at {address!r}: versions differ" in err
    assert inits == [address]
    assert len(probes) == 1
    assert not store.exists()


def test_a_failed_ray_connection_fails_every_later_attempt_of_the_run_without_retrying_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray retries a refused connection for 20 s: each item asking again cost that much."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("this process has a Ray session: no connection is opened")
    from pyattacker.run import Runner, pipeline
    from pyattacker.run import _ray as run_ray
    from pyattacker.store import SQLiteStore, results

    calls: list[str | None] = []

    def refused(address: str | None, *, num_cpus: int | None, field: str) -> bool:
        calls.append(address)
        raise ConfigError("cannot start a local Ray: no", field="executor")

    monkeypatch.setattr(run_ray, "connect", refused)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    store = SQLiteStore(tmp_path / "r.db")
    with Runner(store, concurrency=3, handle_signals=False) as runner:
        runner.run(pipeline("r", task(square, executor="ray")).map(range(4)))
    outcomes = [(row["state"], str(row["error"])) for row in results(store)]
    store.close()
    assert calls == [None]
    assert len(outcomes) == 4
    assert all(s == "failed" and "cannot start a local Ray" in e for s, e in outcomes)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("refuse", [True, False])
def test_rays_own_log_of_a_token_refusal_is_left_out_and_any_other_kept(
    refuse: bool, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    import ray._raylet

    monkeypatch.setattr(ray._raylet, "InnerGcsClient", _LoggingGcsClient)
    monkeypatch.setattr(_LoggingGcsClient, "refuse", refuse)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with listening(_http2_server) as address:
        if refuse:
            with pytest.raises(ConfigError, match="requires Ray's token authentication"):
                check_address(address, "--ray")
        else:
            check_address(address, "--ray")
    err = capfd.readouterr().err
    assert (_RAY_WARNING in err) is not refuse  # our message says it; Ray's line would twice
