"""agentmeter-tui: run, watch, meter and hand-score coding-agent benchmarks."""

__version__ = "0.1.0"
