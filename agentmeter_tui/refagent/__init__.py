"""The project's own small reference agent: an OpenAI Chat Completions loop that runs shell
commands in its workspace. Stdlib only, so it starts fast and runs wherever a Python does."""
