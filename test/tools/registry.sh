#!/usr/bin/env bash
# Builds (once) the distribution v3 registry from the Go module proxy into the
# cache folder outside the clone, and prints the binary's path.
set -euo pipefail
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
BIN=$CACHE_ROOT/registry-$REGISTRY_VERSION/registry
if [ ! -x "$BIN" ]; then
  echo "registry: building distribution $REGISTRY_VERSION (about 2 minutes cold)" >&2
  mkdir -p "$(dirname "$BIN")"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
  mv "$tmp/registry" "$BIN"
fi
echo "$BIN"
