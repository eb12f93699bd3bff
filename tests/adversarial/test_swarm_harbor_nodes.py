"""Attack: Harbor trials on the nodes of a fleet (``swarmharbor.py``, ``nodeengines.py``).

- Swarm may put a trial's service on a node it has not yet noticed is down (a few missed
  heartbeats): the task sits ``assigned`` there and never starts. A session that trusts the
  task's state waits ``start_timeout`` (two minutes), or takes a container on a dead node; it
  must see the node down at its first look and end the attempt "lost" (it then reruns).
- A trial placed on a node whose engine the runner cannot reach is a trial nobody can drive:
  the service's constraints keep it on the manager and the nodes ``node_engines`` names.

The engine is a recorded-shape stand-in: the task and node objects carry the fields the Docker
API returns (``/tasks``: Status.State, NodeID, Status.ContainerStatus; ``/nodes``: ID,
Description.Hostname, Status.State, Spec.Availability), nothing else."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentmeter_tui.core.sandboxes.docker import engine as engines
from agentmeter_tui.core.sandboxes.docker.fleet import NodeWatch, _node
from agentmeter_tui.core.sandboxes.docker.swarmharbor import SwarmHarborSession

POLLS_BEFORE_IT_RUNS = 10  # the stand-in reports a container after this many polls (old code's only way out)
NODES = [{"ID": f"node{i}", "Description": {"Hostname": f"amf-n{i}"}, "Status": {"State": state},
          "Spec": {"Availability": "active"}} for i, state in ((1, "ready"), (2, "ready"), (3, "down"))]


class DeadNodeApi:
    def __init__(self):
        self.polls = 0

    def tasks(self, filters):
        self.polls += 1
        if self.polls >= POLLS_BEFORE_IT_RUNS:
            return [{"ID": "t1", "NodeID": "node3",
                     "Status": {"State": "running", "ContainerStatus": {"ContainerID": "c1"}}}]
        return [{"ID": "t1", "NodeID": "node3", "Status": {"State": "assigned"}}]

    def nodes(self):
        return NODES


def test_a_harbor_trial_placed_on_a_dead_node_ends_lost_at_the_first_look():
    api = DeadNodeApi()
    engine = SimpleNamespace(client=SimpleNamespace(api=api), info={"Swarm": {"NodeID": "node1"}})
    session = SwarmHarborSession.__new__(SwarmHarborSession)
    session.engine = session.manager = engine
    session.sandbox = SimpleNamespace(nodes=NodeWatch())
    session.config = SimpleNamespace(start_timeout=120.0)
    session.service_id, session.node_id, session.slot = "svc", None, SimpleNamespace(node=None)
    with pytest.raises(ConnectionError, match="amf-n3 lost"):
        session._wait_running()
    assert api.polls < POLLS_BEFORE_IT_RUNS
    assert session.slot.node == "amf-n3"  # the lost attempt is recorded on the node it was lost on


def test_harbor_trials_go_only_to_nodes_whose_engine_the_runner_reaches():
    from agentmeter_tui.core.sandboxes.docker.nodeengines import NodeEngines

    nodes = {raw["ID"]: _node(raw) for raw in NODES}
    # node_engines names node 2: the manager (node 1) and node 2 take Harbor trials, node 3 none.
    assert NodeEngines({"amf-n2": "unix:///nowhere.sock"}).constraints("node1", nodes) == ["node.id!=node3"]
    # None named: the manager's node only, as before.
    assert NodeEngines({}).constraints("node1", nodes) == ["node.id==node1"]
    # A node Swarm chose that has no engine named (its constraint raced a join): a clear error.
    with pytest.raises(engines.EngineError, match="node_engines names no engine for it"):
        NodeEngines({"amf-n2": "unix:///nowhere.sock"}).engine("amf-n3")


def test_closed_trials_starting_at_once_share_the_closed_network():
    """Two closed trials starting at once both find no closed network and both make it; a swarm
    manager refuses the second with a 500 ("name conflicts with an existing object", not the
    409 a plain engine gives): that trial must take the network the other made, not end
    infra-invalid (seen on the 3-node fleet with concurrency 6)."""
    from docker.errors import APIError, NotFound

    from agentmeter_tui.core.sandboxes.docker.swarmharbor import CLOSED_NETWORK, closed_network

    class Networks:
        def get(self, name):
            raise NotFound("network not found")

        def create(self, name, **kwargs):
            response = SimpleNamespace(status_code=500, reason="Internal Server Error", url="/networks/create")
            raise APIError("500 Server Error", response, explanation="rpc error: code = Unknown desc = name "
                                                                       "conflicts with an existing object")

    assert closed_network(SimpleNamespace(networks=Networks())) == CLOSED_NETWORK
