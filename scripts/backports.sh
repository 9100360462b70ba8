# SPDX-License-Identifier: MIT
# Sourced by the scripts that install from Debian 12's bookworm-backports
# (valkey-test.sh, tls-test.sh): `installed PKG` and `add_backports`, which
# lists the suite beside the ones apt already lists, from the same archive
# (a no-op when some source already names it). Needs root; the caller runs
# apt-get update after it.

installed() {
  [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]
}

add_backports() {
  local list=/etc/apt/sources.list.d/bookworm-backports.sources uri
  grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  # The archive apt already uses for bookworm itself.
  uri=$(grep -rhs -m1 '^URIs:.*debian$\|^URIs:.*debian/$' /etc/apt/sources.list.d/*.sources \
          | awk '{print $2}' | head -n1)
  [[ -n "$uri" ]] || uri=http://deb.debian.org/debian
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
    "$uri" /usr/share/keyrings/debian-archive-keyring.gpg >"$list"
}
