"""The fleet's pieces that need no engine: image references split for a registry push, a
node's state as a fleet view shows it, the node column's migration and the per-node sums, a
node's slots and its drain, the ``node`` op, and the feed's nodes."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from agentmeter_tui.core.run import feed as feed_module
from agentmeter_tui.core.run.feed import NODES_EVERY, Feed
from agentmeter_tui.core.run.liveops import set_node
from agentmeter_tui.core.run.requests import NodeChange, RequestError, parse_request
from agentmeter_tui.core.sandboxes import Sandbox
from agentmeter_tui.core.sandboxes.docker.fleet import Node, NodeWatch, split_reference
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES


def test_image_references_keep_a_registry_port():
    assert split_reference("agentmeter/host:858940c130f7") == ("agentmeter/host", "858940c130f7")
    assert split_reference("10.213.77.1:5000/agentmeter/host") == ("10.213.77.1:5000/agentmeter/host", "latest")
    assert split_reference("busybox") == ("busybox", "latest")
    assert split_reference("a/b@sha256:00ff") == ("a/b", "sha256:00ff")


def test_a_node_is_ready_drained_or_down():
    assert Node("1", "n1", "ready", "active").fleet_state == "ready"
    assert Node("1", "n1", "ready", "drain").fleet_state == "drain"
    assert Node("1", "n1", "ready", "pause").fleet_state == "drain"
    assert Node("1", "n1", "down", "active").fleet_state == "down"
    assert Node("1", "n1", "unknown", "drain").fleet_state == "down"


def test_trials_per_node(tmp_path):
    store = Store(tmp_path / "s.db")
    base = {"suite_id": "s", "task_id": "t", "model": "m", "cli": "c", "trial_index": 1}
    for node, status in (("n1", "passed"), ("n1", "running"), ("n2", "infra-invalid"), ("n2", "passed"),
                         (None, "passed")):
        store.runs.insert_trial({**base, "status": status, "node": node})
    assert store.runs.nodes("s") == [{"node": "n1", "trials": 2, "running": 1, "infra_invalid": 0},
                                {"node": "n2", "trials": 2, "running": 0, "infra_invalid": 1}]
    assert store.runs.nodes("other") == []


# One node as `docker node inspect` (Docker 20.10.24, a one-node swarm) gave it; its TLS
# certificates and engine plugins left out.
NODE = json.loads((FIXTURES / "fleet" / "node.json").read_text())


class Recording:
    """A docker client's ``api`` answering ``nodes()`` with the recorded node, recording updates."""

    def __init__(self, nodes: list[dict]):
        self.nodes_ = nodes
        self.updates: list[tuple] = []
        self.api = self

    def nodes(self) -> list[dict]:
        return self.nodes_

    def update_node(self, node_id: str, version: int, spec: dict) -> None:
        self.updates.append((node_id, version, spec))


def test_a_nodes_slots_are_its_cpus_and_memory_over_a_jobs_reservations():
    watch = NodeWatch()
    watch.refresh(Recording([NODE]))
    cpus, memory = NODE["Description"]["Resources"]["NanoCPUs"], NODE["Description"]["Resources"]["MemoryBytes"]
    [node] = watch.summary(0.25, 256 << 20)  # the fleet tests' reservations
    assert node["name"] == NODE["Description"]["Hostname"] and node["state"] == "ready"
    assert node["slots"] == min(cpus // 250_000_000, memory // (256 << 20))
    assert watch.summary(1.0, 64 << 30)[0]["slots"] == memory // (64 << 30)  # memory is the tighter bound
    assert node["seen"] is not None  # read ready just now


def test_draining_a_node_updates_its_spec_at_its_version():
    client = Recording([NODE])
    watch = NodeWatch()
    watch.set_availability(client, NODE["Description"]["Hostname"], "drain")
    assert client.updates == [(NODE["ID"], NODE["Version"]["Index"], {**NODE["Spec"], "Availability": "drain"})]
    with pytest.raises(ValueError, match="no node 'elsewhere'"):
        watch.set_availability(client, "elsewhere", "drain")


def test_the_node_op_is_checked_and_a_run_without_nodes_refuses_it():
    assert parse_request({"op": "node", "name": "amf-n2", "availability": "drain"}).availability == "drain"
    for bad, field in (({"name": "n", "availability": "pause"}, "availability"), ({"availability": "drain"}, "name"),
                       ({"name": 2, "availability": "drain"}, "name"), ({"name": "", "availability": "drain"}, "name")):
        with pytest.raises(RequestError, match=f"^node: {field}: "):
            parse_request({"op": "node", **bad})

    class NoNodes(Sandbox):
        kind = "none"

        async def open(self, task, trial_id, token):
            raise NotImplementedError

    reply = asyncio.run(set_node(NoNodes.__new__(NoNodes), NodeChange(op="node", name="n", availability="drain")))
    assert reply == {"ok": False, "error": "node: no fleet: this run's sandbox places no trials on nodes"}


def test_ticks_carry_the_nodes_when_they_changed(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(feed_module.time, "monotonic", lambda: clock[0])
    nodes = [{"name": "n1", "state": "ready", "slots": 8, "seen": 1.0}]
    sandbox = SimpleNamespace(fleet_nodes=lambda: nodes)
    feed = Feed(SimpleNamespace(scheduler=SimpleNamespace(running={}), _sandbox=sandbox))  # type: ignore[arg-type]
    assert feed._nodes_news() == [{"name": "n1", "state": "ready", "running": 0, "slots": 8, "seen": 1.0}]
    clock[0] += NODES_EVERY
    assert feed._nodes_news() is None  # the same: not sent again
    nodes[0]["state"] = "drain"
    assert feed._nodes_news() is None  # changed, but read at most once per NODES_EVERY
    clock[0] += NODES_EVERY
    assert feed._nodes_news()[0]["state"] == "drain"
    assert Feed(SimpleNamespace(scheduler=None))._nodes_news() is None  # type: ignore[arg-type]
