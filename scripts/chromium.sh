#!/usr/bin/env bash
# Make sure Debian's headless-capable chromium is installed, for the
# console's real-browser tests (console/browser_test.go, driven with
# chromedp). Chromium runs no service: each test starts its own headless
# browser with a fresh profile and stops it, so there is nothing to stop.
#
#   scripts/chromium.sh install   install Debian's chromium if missing
#   scripts/chromium.sh start     the same (so services-up can call it)
#   scripts/chromium.sh stop      nothing to stop
#   scripts/chromium.sh path      print the browser's path; exit 1 if none
#
# It writes ACEMQ_TEST_CHROMIUM=<path> to <state>/chromium/env, which
# `make test` sources: the browser tests fail (not skip) under
# ACEMQ_REQUIRE_SERVICES=1 when it is missing.
set -euo pipefail
umask 022

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CDIR="$ACEMQ_STATE/chromium"

find_browser() {
	local b
	for b in chromium chromium-browser; do
		if command -v "$b" >/dev/null 2>&1; then
			command -v "$b"
			return 0
		fi
	done
	return 1
}

install() {
	if ! find_browser >/dev/null; then
		lock_state chromium
		find_browser >/dev/null || apt_install chromium fonts-dejavu-core
	fi
	local b
	b="$(find_browser)" || die "chromium is still missing after apt-get install chromium; install it by hand"
	mkdir -p "$CDIR"
	write_env "$CDIR/env" "ACEMQ_TEST_CHROMIUM=$b"
}

case "${1:-}" in
install | start) install ;;
stop) ;;
path) find_browser ;;
*) die "usage: $0 install|start|stop|path" ;;
esac
