#!/usr/bin/env bash
# Puts kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kubectl and etcd into a cache folder outside the clone, keyed by version,
# and prints that folder on stdout. The Kubernetes binaries come from one go
# build, so the packages they share compile once (kube-scheduler and kubelet
# are the sandbox's real node, see kube-node.sh; kubectl runs the tutorials'
# commands, see test/tutorial). A cache that lacks some of them (one made
# before kubectl was added) gets only the missing ones built.
#
# Why a cache outside the clone: CI runs on a fresh clone of the same machine,
# so a cache inside the repo would be rebuilt (8+ minutes) on every run.
#
# Order: reuse the cache; else try controller-runtime's setup-envtest download
# (fails fast where only the Go module proxy is reachable); else build from the
# Go module proxy in throwaway wrapper modules (go install cannot build these
# because k8s.io/kubernetes relies on replace directives).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
DIR=${PACKLINE_K8S_ASSETS:-$CACHE_ROOT/k8s-v$K8S_VERSION}

log() { echo "k8s-assets: $*" >&2; }

KUBE_BINS="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"

have_kube() {
  local b
  for b in $KUBE_BINS; do [ -x "$DIR/$b" ] || return 1; done
}

have_all() {
  have_kube && [ -x "$DIR/etcd" ]
}

if have_all; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/packline-k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

try_setup_envtest() {
  log "trying setup-envtest download of $K8S_VERSION"
  local out
  if out=$(timeout 120 go run sigs.k8s.io/controller-runtime/tools/setup-envtest@release-0.22 \
      use "$K8S_VERSION" --bin-dir "$WORK/envtest" -p path 2>"$WORK/envtest.log") && [ -n "$out" ] && [ -x "$out/kube-apiserver" ]; then
    cp "$out/kube-apiserver" "$out/etcd" "$DIR/"
    if [ -x "$out/kubectl" ]; then cp "$out/kubectl" "$DIR/"; fi
    log "setup-envtest provided kube-apiserver, etcd and kubectl"
    return 0
  fi
  log "setup-envtest download unavailable ($(tail -n1 "$WORK/envtest.log" 2>/dev/null)); building from the module proxy"
  return 1
}

build_kube() {
  local missing=() b
  for b in $KUBE_BINS; do [ -x "$DIR/$b" ] || missing+=("$b"); done
  log "building ${missing[*]} v$K8S_VERSION (about 10 minutes cold on 2 cores for all five)"
  local m="$WORK/kube"
  mkdir -p "$m"
  cd "$m"
  go mod init packline.local/kubebuild >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    # Every staging module that kubernetes' go.mod points at ./staging gets
    # pinned to the matching published v0.x tag.
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod" | while read -r mod; do
      echo "replace $mod => $mod v0.${K8S_VERSION#1.}"
    done
  } >>go.mod
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy >/dev/null 2>"$WORK/tidy.log" || { cat "$WORK/tidy.log" >&2; return 1; }
  local v="k8s.io/component-base/version"
  local minor=${K8S_VERSION#1.}; minor=${minor%%.*}
  local ld="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
  local pkgs=()
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$WORK/bin/" "${pkgs[@]}"
  # Copied in under a temporary name and renamed: a binary another run is
  # executing is never overwritten in place.
  for b in "${missing[@]}"; do cp "$WORK/bin/$b" "$DIR/.$b.tmp" && mv "$DIR/.$b.tmp" "$DIR/$b"; done
  log "${missing[*]} cached in $DIR"
}

build_etcd() {
  log "building etcd v$ETCD_VERSION from the module proxy"
  local m="$WORK/etcd"
  mkdir -p "$m"
  cd "$m"
  go mod init packline.local/etcdbuild >/dev/null 2>&1
  cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null 2>"$WORK/etcd.log" || { cat "$WORK/etcd.log" >&2; return 1; }
  go mod tidy >/dev/null 2>>"$WORK/etcd.log" || { cat "$WORK/etcd.log" >&2; return 1; }
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$DIR/etcd" .
  log "etcd cached in $DIR"
}

if [ ! -x "$DIR/kube-apiserver" ] && [ -z "${PACKLINE_SKIP_ENVTEST_DOWNLOAD:-}" ]; then
  try_setup_envtest || true
fi
# setup-envtest gives kube-apiserver, etcd and kubectl only: build the rest.
have_kube || (build_kube)
[ -x "$DIR/etcd" ] || (build_etcd)
have_all || { log "assets incomplete in $DIR"; exit 1; }
echo "$DIR"
