#!/usr/bin/env bash
# Starts a private system-like dbus-daemon with its socket in DIR and prints its address.
# Usage: start-bus.sh DIR   (writes DIR/bus.conf, DIR/bus.pid, DIR/bus.address; stop with stop-bus.sh DIR)
set -euo pipefail
dir=${1:?usage: start-bus.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sed "s|@SOCKET@|$dir/bus.sock|" "$here/bus.conf.in" >"$dir/bus.conf"
dbus-daemon --config-file="$dir/bus.conf" --fork --print-address=3 --print-pid=4 3>"$dir/bus.address" 4>"$dir/bus.pid"
cat "$dir/bus.address"
