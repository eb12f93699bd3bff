"""The fleet's pieces that need no engine: image references split for a registry push, a
node's state as a fleet view shows it, the node column's migration and the per-node sums."""

from __future__ import annotations

from agentmeter_tui.core.sandboxes.docker.fleet import Node, split_reference
from agentmeter_tui.core.store import Store


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
        store.insert_trial({**base, "status": status, "node": node})
    assert store.nodes("s") == [{"node": "n1", "trials": 2, "running": 1, "infra_invalid": 0},
                                {"node": "n2", "trials": 2, "running": 0, "infra_invalid": 1}]
    assert store.nodes("other") == []
