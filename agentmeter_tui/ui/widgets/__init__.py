"""Widgets of the agentmeter TUI: small, reusable, drawn from theme variables only."""
