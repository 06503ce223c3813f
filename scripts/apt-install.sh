#!/usr/bin/env bash
# scripts/apt-install.sh PACKAGE...
#
# Installs the Debian packages a make target needs (promtool and prometheus
# from "prometheus", chromium for the dashboard's browser test) without
# leaving a service behind on the developer's machine. It prints one line
# saying what it installs and where apt's output goes (a log file, shown
# in full on the terminal's stderr tail when apt fails); a policy-rc.d
# that exits 101 forbids every service start while
# apt runs (it is restored on every exit); afterwards each systemd unit and
# init script shipped by the named packages, or by a package the install
# pulled in, is disabled, and stopped where an init system runs.
#
# Test seams (scripts/apt_install_test.go runs this with fake tools):
#   NARWHAL_POLICY_RC_D  the policy file (default /usr/sbin/policy-rc.d)
#   NARWHAL_SYSTEMD_DIR  present when systemd runs (default /run/systemd/system)
#   NARWHAL_APT_LOG      apt's output and the service steps (default a new temporary file)
set -euo pipefail

if [ $# -eq 0 ]; then
	echo "usage: scripts/apt-install.sh PACKAGE..." >&2
	exit 2
fi
policy=${NARWHAL_POLICY_RC_D:-/usr/sbin/policy-rc.d}
systemd_dir=${NARWHAL_SYSTEMD_DIR:-/run/systemd/system}
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi

log=${NARWHAL_APT_LOG:-$(mktemp "${TMPDIR:-/tmp}/narwhal-apt-install.XXXXXX.log")}
: >"$log"
# Progress goes to the log: the terminal gets the one line below, and a
# warning or apt's failure.
say() { echo "apt-install: $*" >>"$log"; }
warn() { echo "apt-install: warning: $*" | tee -a "$log" >&2; }

installed() { dpkg-query -W -f='${Package}\n' 2>/dev/null | sort -u || true; }

echo "apt-install: installing Debian package(s) $* with apt-get${SUDO:+ (via sudo)}; no service they ship is started, and each is left disabled (apt's output: $log)"
before=$(installed)

# Forbid service starts for the install, keeping any policy already there
# (Docker images ship one) to put back afterwards.
saved=
restore_policy() {
	$SUDO rm -f "$policy"
	if [ -n "$saved" ]; then
		$SUDO mv "$saved" "$policy"
	fi
}
if [ -e "$policy" ]; then
	saved="$policy.apt-install-saved"
	$SUDO cp -p "$policy" "$saved"
fi
trap restore_policy EXIT
trap 'exit 130' INT TERM
printf '#!/bin/sh\n# written by narwhal scripts/apt-install.sh: no service starts during its install\nexit 101\n' |
	$SUDO tee "$policy" >/dev/null
$SUDO chmod 755 "$policy"

apt_failed() {
	echo "apt-install: apt-get failed (exit $1); the end of $log:" >&2
	tail -n 25 "$log" >&2
	exit "$1"
}
$SUDO apt-get update -q >>"$log" 2>&1 || apt_failed $?
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1 || apt_failed $?

restore_policy
saved=
trap - EXIT

# The packages whose services to leave off: the named ones and whatever
# the install added.
after=$(installed)
new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") || true)
# shellcheck disable=SC2086 # one package name per word
files=$(dpkg -L "$@" $new 2>/dev/null || true)
units=$(printf '%s\n' "$files" | grep -E '^(/usr)?/lib/systemd/system/[^/@]+\.(service|socket|timer)$' | xargs -r -n1 basename | sort -u || true)
initd=$(printf '%s\n' "$files" | grep -E '^/etc/init\.d/[^/]+$' | xargs -r -n1 basename | sort -u || true)

running=
if [ -d "$systemd_dir" ]; then
	running=1
fi
for u in $units; do
	if command -v systemctl >/dev/null; then
		if [ -n "$running" ]; then
			say "stopping and disabling $u"
			$SUDO systemctl disable --now "$u" || warn "systemctl disable --now $u failed"
		else
			say "disabling $u (no systemd running: nothing was started)"
			$SUDO systemctl disable "$u" || warn "systemctl disable $u failed"
		fi
	fi
done
for s in $initd; do
	if [ -z "$running" ] && command -v service >/dev/null; then
		say "stopping init script $s (if it runs)"
		$SUDO service "$s" stop >/dev/null 2>&1 || true
	fi
	if command -v update-rc.d >/dev/null; then
		$SUDO update-rc.d "$s" disable >/dev/null 2>&1 || warn "update-rc.d $s disable failed"
	fi
done
# shellcheck disable=SC2086 # join the names with spaces
left=$(echo $units $initd)
say "done: installed $*; services left disabled and not running: ${left:-none}"
