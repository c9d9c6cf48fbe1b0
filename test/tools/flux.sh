#!/usr/bin/env bash
# Builds (once) Flux's source-controller and kustomize-controller from the Go
# module proxy into the cache folder outside the clone, with their CRDs, and
# prints the folder. These versions build with the proxy's fluxcd/pkg
# modules (source-controller v1.9.4+ and kustomize-controller v1.9.6 need
# fluxcd/pkg versions it refuses).
#
# Each module's go.mod replaces ./api with the api module of the same
# version, so it is built from the module source with that api module
# copied beside it.
set -euo pipefail
SOURCE_VERSION=${FLUX_SOURCE_VERSION:-v1.9.3}
KUSTOMIZE_VERSION=${FLUX_KUSTOMIZE_VERSION:-v1.9.5}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
OUT=$CACHE_ROOT/flux-source-$SOURCE_VERSION-kustomize-$KUSTOMIZE_VERSION

build() { # module version binary
  local mod=$1 ver=$2 bin=$3
  [ -x "$OUT/$bin" ] && return
  echo "flux: building $mod@$ver (a few minutes cold)" >&2
  local tmp
  tmp=$(mktemp -d)
  local src api
  src=$(go mod download -json "$mod@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  api=$(go mod download -json "$mod/api@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$src" "$tmp/src" && chmod -R u+w "$tmp/src"
  rm -rf "$tmp/src/api" && cp -r "$api" "$tmp/src/api" && chmod -R u+w "$tmp/src/api"
  (cd "$tmp/src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/$bin" .)
  mkdir -p "$OUT/crds"
  cp "$tmp/src"/config/crd/bases/*.yaml "$OUT/crds/"
  mv "$tmp/$bin" "$OUT/$bin"
  rm -rf "$tmp"
}
build github.com/fluxcd/source-controller "$SOURCE_VERSION" source-controller
build github.com/fluxcd/kustomize-controller "$KUSTOMIZE_VERSION" kustomize-controller
echo "$OUT"
