#!/bin/sh
# Browser tests drive Debian's chromium through Playwright (Playwright's own download does not
# work on closed networks). Install it when missing and we may; otherwise say what to do.
set -e
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "Browser tests need /usr/bin/chromium: sudo apt-get install -y chromium" >&2
  exit 1
fi
