#!/bin/sh
# What pip cannot install: bubblewrap (the operating-system sandbox every untrusted candidate and
# uploaded reference runs in; workers/boundary.py) and, with --browser, Debian's chromium (the
# browser tests drive /usr/bin/chromium through Playwright, whose own download does not work on
# closed networks). Installed with apt-get when missing and we may; otherwise say what to do.
set -e
need=""
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
if [ "$1" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
  need="$need chromium"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
else
  echo "KernelEvolve needs:$need (sudo apt-get install -y$need)" >&2
  case "$need" in
    *bubblewrap*) echo "Without bubblewrap, untrusted code is refused (or set KERNELEVOLVE_SANDBOX=none)." >&2 ;;
  esac
  [ "$1" = "--browser" ] && exit 1
fi
exit 0
