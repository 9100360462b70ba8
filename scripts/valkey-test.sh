#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The suites that talk to a server, run against Valkey 8 instead of Redis 7
# (the harness starts valkey-server and valkey-cli under
# RL_TEST_SERVER=valkey: tests/redis_harness.h). Debian 12 ships Valkey in
# bookworm-backports only: the suite is added beside the ones apt already
# lists, from the same archive, and valkey-server and valkey-tools are
# installed from it when missing (root needed then). Builds build/ through
# scripts/test.sh, which also installs the other packages.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

die() {
  echo "valkey-test.sh: error: $*" >&2
  exit 1
}

# shellcheck source=scripts/backports.sh
. "$root/scripts/backports.sh"

if ! installed valkey-server || ! installed valkey-tools; then
  [[ $(id -u) -eq 0 ]] || die "must run as root to install valkey-server"
  add_backports
  export DEBIAN_FRONTEND=noninteractive
  # Keep the package's postinst from starting the system service.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  trap '[[ $own_policy -eq 1 ]] && rm -f "$policy"' EXIT
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  apt-get update || die "apt-get update failed"
  apt-get install -y --no-install-recommends -t bookworm-backports valkey-server valkey-tools \
    || die "apt-get install valkey-server valkey-tools failed"
fi
valkey-server --version

# Every suite that starts a server, the fault suite (test_policy), Cluster
# and Sentinel included.
suites='^test_(sync|exact|tiered|quota|policy_faults|nodes|usage|fleet|caller|cluster|sentinel|unixsock|script_keys|restricted|share_lua|redisurl_live|safedefaults|shared_global|hot_fleet|hot_policy|lease|logs)$'
# A slot moved by --cluster reshard costs tens of ms on Valkey 8 against
# about one on Redis 7, so test_cluster's reshard of a whole master (5461
# slots, while the fleet runs rounds) outlasts its case's 300 s on a loaded
# box: Check's timeouts are tripled here, the test's own bounds unchanged.
RL_TEST_SERVER=valkey CK_TIMEOUT_MULTIPLIER=3 bash scripts/test.sh -- -R "$suites" --output-on-failure --no-tests=error
