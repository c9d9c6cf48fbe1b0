#!/usr/bin/env bash
# Prints the path of a runc binary for the sandbox's real node. runc needs cgo
# and libseccomp, so it comes from the distribution rather than the module
# proxy: Debian's package is installed when missing (needs root and apt).
set -euo pipefail

log() { echo "runc: $*" >&2; }

if [ -n "${PACKLINE_RUNC_BIN:-}" ] && [ -x "$PACKLINE_RUNC_BIN" ]; then
  echo "$PACKLINE_RUNC_BIN"
  exit 0
fi
if ! command -v runc >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { log "runc is not installed and apt-get is not available"; exit 1; }
  log "installing runc from the distribution (apt-get install runc)"
  apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y runc >&2
fi
command -v runc
