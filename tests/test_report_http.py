"""The one read-only route server both live servers use: the route table answers, GET and
HEAD only, 404 for any other path, a handler's failure is a 500 and the server goes on,
and blocking handlers run off the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pyattacker.report._http import TEXT, Handler, Response, RouteServer, asset_routes, respond


def _routes(seen: list[str]) -> dict[str, Handler]:
    def echo(query: str) -> Response:
        seen.append(query)
        return 200, TEXT, query.encode()

    def broken(query: str) -> Response:
        raise LookupError("the store went away")

    return {"/echo": echo, "/broken": broken, "/healthz": lambda q: (200, TEXT, b"ok\n")}


def test_a_route_gets_its_query_string_and_answers_with_its_response() -> None:
    seen: list[str] = []
    routes = _routes(seen)
    assert respond(routes, "GET", "/echo?since=2.5&x=1") == (200, TEXT, b"since=2.5&x=1")
    assert respond(routes, "HEAD", "/echo") == (200, TEXT, b"")
    assert seen == ["since=2.5&x=1", ""]


def test_a_handler_that_raises_is_a_500_naming_the_error() -> None:
    status, kind, body = respond(_routes([]), "GET", "/broken")
    assert (status, kind) == (500, TEXT)
    assert body == b"LookupError: the store went away\n"


@given(path=st.text(max_size=40).map(lambda p: "/" + p))
def test_any_path_not_in_the_table_is_404(path: str) -> None:
    routes = _routes([])
    if path.partition("?")[0] not in routes:
        assert respond(routes, "GET", path)[0] == 404


@given(method=st.text(min_size=1, max_size=10).filter(lambda m: m not in ("GET", "HEAD")))
def test_any_method_but_get_and_head_is_405(method: str) -> None:
    assert respond(_routes([]), method, "/healthz")[0] == 405


def test_assets_are_served_with_their_content_type_and_nothing_else_of_the_folder() -> None:
    routes = asset_routes(["uPlot.js", "page.css"])
    assert respond(routes, "GET", "/assets/uPlot.js")[1] == "text/javascript; charset=utf-8"
    assert respond(routes, "GET", "/assets/page.css")[1] == "text/css; charset=utf-8"
    assert b"uPlot" in respond(routes, "GET", "/assets/uPlot.js")[2]
    for other in ("/assets/live.html", "/assets/", "/assets/../_http.py", "/assets/page.js"):
        assert respond(routes, "GET", other)[0] == 404, other


def test_blocking_handlers_run_off_the_loop_and_a_failure_leaves_the_server_serving() -> None:
    threads: list[threading.Thread] = []

    def where(query: str) -> Response:
        threads.append(threading.current_thread())
        return 200, TEXT, b"here\n"

    async def ask(url: str, request: bytes) -> bytes:
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request)
        answer = await reader.read()
        writer.close()
        return answer

    async def main() -> tuple[str, bytes, bytes]:
        routes = {"/where": where, **_routes([])}
        server = RouteServer(routes, blocking=True)
        url = await server.start()
        try:
            broken = await ask(url, b"GET /broken HTTP/1.1\r\n\r\n")
            answer = await ask(url, b"GET /where HTTP/1.1\r\n\r\n")
            return url, broken, answer
        finally:
            await server.close()

    url, broken, answer = asyncio.run(main())
    assert url.startswith("http://127.0.0.1:")
    assert broken.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Security-Policy: default-src 'none';" in answer
    assert answer.endswith(b"\r\n\r\nhere\n")
    assert threads
    assert threads[0] is not threading.main_thread()


def test_both_live_servers_refuse_alike_being_one_server_with_two_route_tables() -> None:
    from pyattacker.report import LiveServer
    from pyattacker.report._serve_store import store_routes

    def no_store() -> Any:
        raise OSError("not read by these requests")

    attack = LiveServer().routes
    run = store_routes(no_store, refresh_s=5)
    for method, path in (("POST", "/metrics"), ("GET", "/nothing"), ("DELETE", "/")):
        assert respond(attack, method, path) == respond(run, method, path)
    assert respond(attack, "GET", "/healthz") == respond(run, "GET", "/healthz")
