"""Screens of the agentmeter TUI: grid (home), cell, live panes, review, report, and dialogs."""
