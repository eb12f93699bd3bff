"""Attack: a swarm job whose node is lost. Swarm keeps such a task ``running`` (for a day,
until it is orphaned) and never reschedules it; a watcher that trusts the task's state waits
for a job that will never report, so the trial never ends. The job's watcher must see the
node down and end the job with that reason (its trial then ends infra-invalid and reruns).

The engine here is a recorded-shape stand-in: the task and node objects carry the fields the
Docker API returns (``/tasks``: Status.State, NodeID; ``/nodes``: ID, Description.Hostname,
Status.State, Spec.Availability), nothing else."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from agentmeter_tui.core.sandboxes.docker.fleet import NodeWatch
from agentmeter_tui.core.sandboxes.docker.swarmjob import Job

POLLS_BEFORE_GIVING_UP = 10  # the stand-in ends the job itself after this many polls (old code's only way out)


class LostNodeApi:
    def __init__(self, job_holder: list):
        self.polls = 0
        self.job_holder = job_holder

    def tasks(self, filters):
        self.polls += 1
        if self.polls >= POLLS_BEFORE_GIVING_UP:
            self.job_holder[0].ended.set()  # what removing the service would do
        return [{"ID": "t1", "NodeID": "node3", "Status": {"State": "running", "ContainerStatus": {"PID": 42}}}]

    def nodes(self):
        return [{"ID": "node1", "Description": {"Hostname": "amf-n1"}, "Status": {"State": "ready"},
                 "Spec": {"Availability": "active"}},
                {"ID": "node3", "Description": {"Hostname": "amf-n3"}, "Status": {"State": "down"},
                 "Spec": {"Availability": "active"}}]


def test_a_job_on_a_lost_node_ends_with_the_reason():
    holder: list = []
    api = LostNodeApi(holder)
    engine = SimpleNamespace(client=SimpleNamespace(api=api))
    sandbox = SimpleNamespace(nodes=NodeWatch(), suite=SimpleNamespace(id="s"))
    session = SimpleNamespace(engine=engine, token="tok", sandbox=sandbox,
                              config=SimpleNamespace(start_timeout=120.0))

    async def make() -> Job:
        return Job(session, ["true"], {}, "/agentmeter/workspace", None)

    job = asyncio.run(make())
    job.service_id = "svc"
    holder.append(job)
    worker = threading.Thread(target=job.watch_state, daemon=True)
    worker.start()
    worker.join()
    assert job.error is not None and "amf-n3 lost" in job.error, job.error
    assert api.polls < POLLS_BEFORE_GIVING_UP  # seen on the first look, not after the service went
