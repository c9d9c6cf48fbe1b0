#!/usr/bin/env bash
# Puts kubelet and kube-scheduler into a cache folder outside the clone, keyed
# by version, and prints that folder on stdout. The sandbox's real node
# (--node=real) runs them.
#
# Built like k8s-assets.sh builds kube-apiserver: a throwaway wrapper module
# that pins every staging module k8s.io/kubernetes points at ./staging to its
# published v0.x tag (go install cannot build these because k8s.io/kubernetes
# relies on replace directives). One go build for both binaries, so the shared
# packages compile once.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
DIR=${PACKLINE_KUBE_NODE:-$CACHE_ROOT/kube-node-v$K8S_VERSION}

log() { echo "kube-node: $*" >&2; }

if [ -x "$DIR/kubelet" ] && [ -x "$DIR/kube-scheduler" ]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/packline-kube-node.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log "building kubelet and kube-scheduler v$K8S_VERSION from the module proxy"
cd "$WORK"
go mod init packline.local/kubenodebuild >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "require k8s.io/kubernetes v$K8S_VERSION"
  sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod" | while read -r mod; do
    echo "replace $mod => $mod v0.${K8S_VERSION#1.}"
  done
} >>go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
go mod tidy >/dev/null 2>"$WORK/tidy.log" || { cat "$WORK/tidy.log" >&2; exit 1; }
v="k8s.io/component-base/version"
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
ld="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$WORK/bin/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler
cp "$WORK/bin/kubelet" "$WORK/bin/kube-scheduler" "$DIR/"
log "kubelet and kube-scheduler cached in $DIR"
echo "$DIR"
