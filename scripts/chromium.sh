#!/usr/bin/env bash
# Headless Chromium renders the report in its screenshot tests (skipped without it):
# installed with apt where apt is usable (as root); never fails for want of it.
# Prints one line when it tried (installed, or why not); nothing when Chromium is there.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
      { apt-get install -y -qq chromium >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 &&
          apt-get install -y -qq chromium >/dev/null 2>&1; }; }; then
    echo "chromium: installed (apt-get install chromium)"
  else
    echo "chromium: not installed (needs apt-get as root); the report screenshot tests will be skipped"
  fi
fi
exit 0
