"""Attacks: an agent, a task folder or a suite file doing its worst; each test failed on the
code before its fix."""
