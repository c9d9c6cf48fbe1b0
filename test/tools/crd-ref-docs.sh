#!/usr/bin/env bash
# Builds (once) crd-ref-docs from the Go module proxy into the cache folder
# outside the clone, and prints the binary's path. make docs runs it to write
# docs/reference/api.md from the types in api/v1alpha1.
set -euo pipefail
CRD_REF_DOCS_VERSION=${CRD_REF_DOCS_VERSION:-v0.3.0}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
BIN=$CACHE_ROOT/crd-ref-docs-$CRD_REF_DOCS_VERSION/crd-ref-docs
if [ ! -x "$BIN" ]; then
  echo "crd-ref-docs: building $CRD_REF_DOCS_VERSION (about 1.5 minutes cold on a loaded 2-core machine)" >&2
  mkdir -p "$(dirname "$BIN")"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/elastic/crd-ref-docs@$CRD_REF_DOCS_VERSION"
  mv "$tmp/crd-ref-docs" "$BIN"
fi
echo "$BIN"
