#!/usr/bin/env bash
# Puts containerd v2 and its runc shim (containerd-shim-runc-v2) into a cache
# folder outside the clone, keyed by version, and prints that folder on stdout.
# The sandbox's real node (--node=real) runs them; 2.1 or later is needed for
# image volumes.
#
# Built without cgo and without the snapshotters that need it (btrfs,
# devmapper, zfs): the real node uses overlayfs.
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.2.1}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
DIR=${PACKLINE_CONTAINERD:-$CACHE_ROOT/containerd-v$CONTAINERD_VERSION}

log() { echo "containerd: $*" >&2; }

if [ -x "$DIR/containerd" ] && [ -x "$DIR/containerd-shim-runc-v2" ]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
log "building containerd v$CONTAINERD_VERSION and containerd-shim-runc-v2 from the module proxy"
m=github.com/containerd/containerd/v2
GOBIN="$DIR" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X $m/version.Version=v$CONTAINERD_VERSION" \
  -tags "no_btrfs no_devmapper no_zfs" \
  "$m/cmd/containerd@v$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@v$CONTAINERD_VERSION"
log "containerd cached in $DIR"
echo "$DIR"
