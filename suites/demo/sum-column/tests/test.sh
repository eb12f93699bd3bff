#!/bin/sh
# Pass when total.txt holds the sum of the qty column of sales.csv.
cd "$AGENTMETER_WORKSPACE" || exit 2
expected=$(awk -F, 'NR > 1 { s += $2 } END { print s }' sales.csv)
actual=$(cat total.txt 2>/dev/null | tr -d ' \n')
[ "$actual" = "$expected" ] || { echo "expected $expected, found '$actual'"; exit 1; }
echo "total is right: $actual"
