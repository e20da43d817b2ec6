#!/usr/bin/env bash
# Stops the bus (and the stand-in, if started with start-standin.sh) that were started in DIR.
set -uo pipefail
dir=${1:?usage: stop-bus.sh DIR}
for f in standin.pid bus.pid; do
    if [ -f "$dir/$f" ]; then
        kill "$(cat "$dir/$f")" 2>/dev/null || true
        rm -f "$dir/$f"
    fi
done
