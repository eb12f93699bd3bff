#!/bin/sh
# Pass when hello.txt holds exactly "hello world".
cd "$AGENTMETER_WORKSPACE" || exit 2
[ -f hello.txt ] || { echo "hello.txt is missing"; exit 1; }
content=$(cat hello.txt)
[ "$content" = "hello world" ] || { echo "hello.txt holds: $content"; exit 1; }
echo "hello.txt is right"
