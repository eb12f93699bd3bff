#!/bin/sh
# Pass when median() is right for odd and even lengths.
cd "$AGENTMETER_WORKSPACE" || exit 2
python3 - <<'PY'
import sys
import stats
cases = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([7], 7), ([1, 2], 1.5)]
bad = [(v, want, stats.median(v)) for v, want in cases if stats.median(v) != want]
for values, want, got in bad:
    print(f"median({values}) = {got}, expected {want}")
sys.exit(1 if bad else 0)
PY
status=$?
[ $status -eq 0 ] && echo "median is right for odd and even lengths"
exit $status
