#!/usr/bin/env bash
# Starts the BlueZ stand-in (dbusmock + glucose_meter.py) on the bus started by start-bus.sh DIR and waits
# until it owns org.bluez. Usage: start-standin.sh DIR ['{"meters": [...]}']   (log in DIR/standin.log)
set -euo pipefail
dir=${1:?usage: start-standin.sh DIR [PARAMETERS_JSON]}
params=${2:-'{}'}
here=$(cd "$(dirname "$0")" && pwd)
export DBUS_SYSTEM_BUS_ADDRESS=$(cat "$dir/bus.address")
/usr/bin/python3 -m dbusmock --system --template "$here/glucose_meter.py" -p "$params" >"$dir/standin.log" 2>&1 &
echo $! >"$dir/standin.pid"
for _ in $(seq 1 100); do
    if dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner \
        string:org.bluez 2>/dev/null | grep -q 'boolean true'; then
        exit 0
    fi
    sleep 0.05
done
echo "the stand-in did not take org.bluez within 5 s; see $dir/standin.log" >&2
exit 1
