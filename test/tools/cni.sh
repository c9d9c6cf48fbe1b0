#!/usr/bin/env bash
# Puts the CNI plugins the sandbox's real node uses (bridge, host-local,
# loopback, portmap) into a cache folder outside the clone, keyed by version,
# and prints that folder on stdout (the kubelet's and containerd's CNI bin dir).
set -euo pipefail

CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-1.9.1}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
DIR=${PACKLINE_CNI:-$CACHE_ROOT/cni-plugins-v$CNI_PLUGINS_VERSION}

log() { echo "cni: $*" >&2; }

if [ -x "$DIR/bridge" ] && [ -x "$DIR/host-local" ] && [ -x "$DIR/loopback" ] && [ -x "$DIR/portmap" ]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
log "building CNI plugins v$CNI_PLUGINS_VERSION from the module proxy"
p=github.com/containernetworking/plugins/plugins
v=v$CNI_PLUGINS_VERSION
GOBIN="$DIR" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
  "$p/main/bridge@$v" "$p/ipam/host-local@$v" "$p/main/loopback@$v" "$p/meta/portmap@$v"
log "CNI plugins cached in $DIR"
echo "$DIR"
