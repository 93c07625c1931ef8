"""The console's memory page: a signed-in person sees a namespace's memories with the run
and step that wrote each, and forgets the namespace (CSRF-checked), told what went; input
that is no namespace is refused in one line."""

from __future__ import annotations

from durable_agents.activities.stores import Stores
from tests.console.live import LiveConsole, csrf_of, signed_in


async def test_a_namespace_is_shown_then_forgotten(console: LiveConsole) -> None:
    console.settings.console_memory_admins.append("alice")  # the served app's own settings
    store = Stores.open(console.settings).memory
    store.remember("customer/jane", "Jane prefers <b>email</b>", {"channel": "email"},
                   key="k1", run_id="chat-9@abc", step=3)  # fmt: skip
    store.remember("customer/omar", "Omar prefers phone", {}, key="k2", run_id="r@1", step=1)
    # Another deployment's, in the same database: none of this console's agents keeps it.
    store.remember("payroll/bob", "Bob's salary", {}, key="k3", run_id="p@1", step=1)
    http, _ = await signed_in(console, "alice")
    page = await http.get("/memory", params={"namespace": "customer/jane"})
    assert page.status_code == 200
    assert "Jane prefers &lt;b&gt;email&lt;/b&gt;" in page.text  # escaped, never markup
    assert 'href="/runs/chat-9"' in page.text and "step 3" in page.text
    assert "Omar" not in page.text
    listed = await http.get("/memory")
    assert "customer/omar" in listed.text and "payroll" not in listed.text
    other = await http.get("/memory", params={"namespace": "payroll/bob"})
    assert other.status_code == 404 and "Bob" not in other.text
    bad = await http.get("/memory", params={"namespace": "../etc passwd"})
    assert bad.status_code == 400
    forged = await http.post("/memory/forget", data={"csrf": "nope", "namespace": "customer/jane"})
    assert forged.status_code == 403
    gone = await http.post(
        "/memory/forget",
        data={"csrf": csrf_of(page.text), "namespace": "customer/jane"},
        headers={"Accept": "application/json"},
    )
    said = gone.json()["message"]
    assert gone.status_code == 200 and said.startswith("alice forgot 1 memories of customer/jane;")
    assert "What stays: Temporal's history of each run" in said  # no erasure promised
    assert "What stays: Temporal" in page.text
    assert store.listing("customer/jane") == [] and len(store.listing("customer/omar")) == 1
    theirs = await http.post(
        "/memory/forget", data={"csrf": csrf_of(page.text), "namespace": "payroll/bob"}
    )
    assert theirs.status_code == 404 and len(store.listing("payroll/bob")) == 1
    bob, bob_csrf = await signed_in(console, "bob")  # not a memory admin
    refused = await bob.post(
        "/memory/forget", data={"csrf": bob_csrf, "namespace": "customer/omar"}
    )
    assert refused.status_code == 403 and len(store.listing("customer/omar")) == 1
    anonymous = await console.client().get("/memory")
    assert anonymous.status_code in (303, 401)
