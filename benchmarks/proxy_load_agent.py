"""A fake agent for ``benchmarks/proxy.py``: by its instruction, either a flooder (prints N
events in the reference agent's format as fast as it can, like ``fake_agent.py``) or a
chatter (makes streamed Chat Completions calls to its provider for S seconds, at most R a
second, printing each call's usage). Stdlib only.

    AGENTMETER_INSTRUCTION="flood 5000" python benchmarks/proxy_load_agent.py
    AGENTMETER_INSTRUCTION="chat 10 20" python benchmarks/proxy_load_agent.py
"""

import http.client
import json
import os
import runpy
import sys
import time
import urllib.parse
from pathlib import Path

role, amount, *rate = os.environ["AGENTMETER_INSTRUCTION"].split()
if role == "flood":
    sys.argv = ["fake_agent.py", amount]
    runpy.run_path(str(Path(__file__).with_name("fake_agent.py")))
    sys.exit(0)

url = urllib.parse.urlsplit(os.environ["REFAGENT_BASE_URL"])
conn = http.client.HTTPConnection(url.hostname, url.port)
headers = {"Authorization": f"Bearer {os.environ['REFAGENT_API_KEY']}", "Content-Type": "application/json"}
body = json.dumps({"model": "load", "stream": True, "stream_options": {"include_usage": True},
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
out = sys.stdout
out.write('{"type": "init", "model": "load"}\n')
started = time.monotonic()
deadline = started + float(amount)
interval = 1 / float(rate[0]) if rate else 0.0
calls = 0
while time.monotonic() < deadline:
    time.sleep(max(0.0, started + calls * interval - time.monotonic()))  # keep to the rate
    conn.request("POST", url.path + "/chat/completions", body, headers)
    response = conn.getresponse()
    usage = None
    for line in response.read().split(b"\n"):
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = json.loads(line[6:]).get("usage") or usage
    calls += 1
    out.write(json.dumps({"type": "usage", "call": calls, "usage": usage}) + "\n")
out.write(json.dumps({"type": "result", "status": "success", "turns": calls}) + "\n")
out.flush()
