"""How far the live forecast (``core/run/forecast.py``) lands from the final bill and finish.

The paper grid's shape (``paper_grid.py``: 6 models x 6 CLIs x 90 tasks x 3 trials, budgets per
tier as there) with a spread of costs: ``core/reporting/synthetic.py``'s records (a price per
model, a thrift per CLI, failures dearer than passes, lognormal noise, infra retries). The run is
replayed offline at concurrency 32 in the scheduler's order (trial round, task, configuration;
a retry at the queue's end), each trial lasting 20 s per turn. At 10 %, 25 % and 50 % of the
trials done, the forecast is taken as the runner would take it and set against the final
figures. Prints one line per point; the goal is within 15 % at 25 % done.

    python benchmarks/forecast_error.py [--seed 7] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentmeter_tui.core.reporting.synthetic import synthetic_records  # noqa: E402
from agentmeter_tui.core.run.forecast import Forecast, Item  # noqa: E402

TIER_BUDGET_USD = {"easy": 0.26, "medium": 0.82, "hard": 3.47}  # as benchmarks/paper_grid.py
SECONDS_PER_TURN = 20.0
POINTS = (0.10, 0.25, 0.50)


def replay(seed: int, concurrency: int):
    attempts = defaultdict(list)
    for record in synthetic_records(models=6, clis=6, tasks=90, trials=3, seed=seed):
        attempts[(record.trial, record.task, record.model, record.cli)].append(record)
    queue = [(key, 0) for key in sorted(attempts, key=lambda k: (k[0], k[1]))]  # trial round, task, config
    queue.reverse()
    total = sum(len(v) for v in attempts.values())
    final_usd = sum(r.cost_usd for v in attempts.values() for r in v)
    final_tokens = sum(r.tokens.raw for v in attempts.values() for r in v)
    forecast, running, clock, done = Forecast(), [], 0.0, 0
    checkpoints, results = list(POINTS), []
    while queue or running:
        while queue and len(running) < concurrency:
            key, attempt = queue.pop()
            record = attempts[key][attempt]
            heapq.heappush(running, (clock + record.turns * SECONDS_PER_TURN, clock, key, attempt))
        end, start, key, attempt = heapq.heappop(running)
        clock = end
        record = attempts[key][attempt]
        forecast.finished(item(record), record.cost_usd, record.tokens.raw, end - start)
        done += 1
        if attempt + 1 < len(attempts[key]):  # infra-invalid: retried at the queue's end
            queue.insert(0, (key, attempt + 1))
        if checkpoints and done >= checkpoints[0] * total:
            share = checkpoints.pop(0)
            live = [(item(attempts[k][a]), *partial(attempts[k][a], (clock - s) / (e - s)), clock - s)
                    for e, s, k, a in running]
            projection = forecast.project([item(attempts[k][a]) for k, a in queue], live,
                                          concurrency=concurrency, now=clock)
            results.append((share, projection))
    return results, final_usd, final_tokens, clock


def item(record) -> Item:
    return Item(record.task, record.model, record.cli, record.tier, TIER_BUDGET_USD[record.tier])


def partial(record, fraction: float) -> tuple[float, int]:
    return record.cost_usd * fraction, int(record.tokens.raw * fraction)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    results, usd, tokens, end = replay(args.seed, args.concurrency)
    print(f"final: ${usd:,.2f}, {tokens:,} tokens, finished after {end / 3600:.2f} h (replayed)")
    for share, p in results:
        err = lambda got, want: 100 * (got - want) / want  # noqa: E731
        inside = p["usd"]["low"] <= usd <= p["usd"]["high"]
        print(f"{share:>4.0%} done: USD {p['usd']['projected']:,.2f} ({err(p['usd']['projected'], usd):+.1f} %, "
              f"90 % interval {p['usd']['low']:,.2f}-{p['usd']['high']:,.2f}, "
              f"final {'inside' if inside else 'outside'}); "
              f"tokens {err(p['tokens']['projected'], tokens):+.1f} %; "
              f"finish {err(p['finish']['at'], end):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
