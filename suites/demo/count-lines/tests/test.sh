#!/bin/sh
# Pass when count.txt holds the line count of data.txt; the reward is 0.5 for an off-by-one.
cd "$AGENTMETER_WORKSPACE" || exit 2
expected=$(wc -l < data.txt | tr -d ' ')
actual=$(cat count.txt 2>/dev/null | tr -d ' \n')
if [ "$actual" = "$expected" ]; then echo "count is right: $actual"; exit 0; fi
if [ -n "$actual" ] && [ $((actual - expected)) -le 1 ] && [ $((expected - actual)) -le 1 ]; then
  echo 0.5 > "$AGENTMETER_REWARD_FILE"
fi
echo "expected $expected, found '$actual'"
exit 1
