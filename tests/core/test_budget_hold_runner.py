"""The ``hold`` op on a real runner (issue 24 item 6): a trial that crosses its token budget
while the operator's hold is on keeps running, and the raise sent then lands; when a hold ends
over budget, the budget kill goes through."""

from __future__ import annotations

from pathlib import Path

from agentmeter_tui.core.run.control import ControlClient
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.runaway_support import gated_runaway
from tests.waiting import wait_for


def test_a_raise_sent_while_the_budget_kill_is_held_lands(db, tmp_path):
    suite = gated_runaway(tmp_path)  # the hold is on before the burner can cross its budget
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    burner = wait_for(lambda: store.trials("runaway", "model = 'burner' and status = 'running'"), "the burner")[0]

    def hold(seconds: float) -> dict:
        with ControlClient(db) as client:
            return client.request("hold", trial=burner["id"], seconds=seconds)

    def raw() -> int:
        return store.db.execute("select coalesce(sum(uncached_input + cached_input + output + reasoning), 0) "
                                "from usage where trial_id = ?", [burner["id"]]).fetchone()[0]

    assert hold(30)["held"] > 0
    (Path(burner["workspace"]) / "gate").touch()

    def crossed() -> bool:
        hold(30)  # an operator still typing: a loaded machine must not let the hold run out first
        return raw() > 30_000

    wait_for(crossed, "the burner to cross its 20,000-token budget under the hold")
    assert store.trial(burner["id"])["status"] == "running"  # held, not killed
    with ControlClient(db) as client:
        assert client.request("budget", trial=burner["id"], tokens=100_000_000)["budget"]["tokens"] == 100_000_000
        assert client.request("status")["running"]  # the raise ended the hold; the trial goes on
    wait_for(lambda: raw() > 60_000, "the burner to go on past its old budget")
    assert store.trial(burner["id"])["status"] == "running"
    # A hold that ends over budget lets the kill through: hold, set a budget it is already over,
    # which ends the hold and checks the budget again.
    hold(30)
    with ControlClient(db) as client:
        client.request("budget", trial=burner["id"], tokens=1000)
    row = wait_for(lambda: (r := store.trial(burner["id"]))["status"] == "killed" and r, "the budget kill")
    assert row["reason"] == "budget:tokens"
    agentmeter("stop", "--db", str(db))
