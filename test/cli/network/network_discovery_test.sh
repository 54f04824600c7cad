#!/usr/bin/env bash
# Brings up test hosts with a second network (fresh index, torn down in a trap even on failure)
# and runs network_discovery_test against them. Exits 77 (skipped) without root or network
# namespaces.
# usage: network_discovery_test.sh TESTHOSTS_SCRIPT DISCOVERY_TEST PROBE_BINARY
set -euo pipefail
script="$1" test_bin="$2" probe_bin="$3"

# need_netns, begin_work, hosts_up
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
need_netns
begin_work network_discovery_test
hosts_up "$script" 2 --second-network
export HORA_TESTHOSTS_DIR="$STATE" HORA_NETWORK_PROBE="$probe_bin"
"$test_bin"
