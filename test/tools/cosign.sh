#!/usr/bin/env bash
# Builds (once) the cosign CLI from the Go module proxy into the cache folder
# outside the clone, and prints the binary's path. The signing tests verify
# what the worker pushed with it, so the check is the tool users run.
set -euo pipefail
COSIGN_VERSION=${COSIGN_VERSION:-v2.6.5}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
BIN=$CACHE_ROOT/cosign-$COSIGN_VERSION/cosign
if [ ! -x "$BIN" ]; then
  echo "cosign: building $COSIGN_VERSION (about 5 minutes cold on 2 cores)" >&2
  mkdir -p "$(dirname "$BIN")"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
  mv "$tmp/cosign" "$BIN"
fi
echo "$BIN"
