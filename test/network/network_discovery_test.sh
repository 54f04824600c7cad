#!/usr/bin/env bash
# Brings up test hosts with a second network (fresh index, torn down in a trap even on failure)
# and runs network_discovery_test against them. Exits 77 (skipped) without root or network
# namespaces.
# usage: network_discovery_test.sh TESTHOSTS_SCRIPT DISCOVERY_TEST PROBE_BINARY
set -euo pipefail
script="$1" test_bin="$2" probe_bin="$3"

if [ "$(id -u)" -ne 0 ]; then echo "skipped: needs root" >&2; exit 77; fi
probe="hora-iface-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then echo "skipped: ip netns unavailable" >&2; exit 77; fi
ip netns del "$probe"

K=""
cleanup() { [ -z "$K" ] || "$script" down --index "$K" >/dev/null 2>&1 || true; }
trap cleanup EXIT
out=$("$script" up --index auto --hosts 2 --second-network)
eval "$out"
K=$HORA_TESTHOSTS_INDEX
export HORA_TESTHOSTS_DIR HORA_NETWORK_PROBE="$probe_bin"
"$test_bin"
