"""A scripted user flow for ``pyattacker attack --scenario examples/flows.py:checkout``.

Each arrival of the load model runs ``checkout`` once: log in, browse a page, think for a
moment, put an item in the cart. Every ``client`` call is one request of the attack,
reported under its ``name`` on both clocks; a failed step (an error, or a status >= 400
unless ``expect=`` says otherwise) raises ``StepFailed`` and ends the flow, which the
report counts as failed at that step. Try it against the echo server, which answers each
request with its own body (so the login "returns" the user it was sent)::

    pyattacker echo-server --port 8080 &
    pyattacker attack http://127.0.0.1:8080/ --scenario examples/flows.py:checkout \
        --rate 5/s --duration 10s
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyattacker.attack import FlowClient


async def checkout(client: FlowClient, row: Mapping[str, Any] | None) -> None:
    user = row["user"] if row else f"user-{client.flow}"
    login = await client.post("/login", name="login", json={"user": user})
    # Later steps of this flow carry the session (the echo server sends the body back).
    client.headers["authorization"] = f"Bearer {login.json()['user']}"
    await client.get("/items?page=1", name="browse")
    await client.sleep(0.2)  # think time: the next step is scheduled when it ends
    await client.post("/cart", name="add to cart", json={"sku": "A-1", "qty": 1})
