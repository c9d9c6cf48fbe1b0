#!/usr/bin/env bash
# Builds (once) Kueue's manager from the Go module proxy into the cache folder
# outside the clone, copies its CRDs and webhook manifests out of the module,
# and prints the folder:
#   kueue                 the manager binary (cmd/kueue)
#   crds/*.yaml           config/components/crd/bases
#   webhook/manifests.yaml config/components/webhook (Mutating/Validating
#                         WebhookConfigurations; the sandbox rewrites their
#                         clientConfig to a URL on loopback with its own CA)
# The build runs niced: the machine is shared.
set -euo pipefail
VERSION=${KUEUE_VERSION:-v0.17.0}
CACHE_ROOT=${PACKLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packline}
OUT=$CACHE_ROOT/kueue-$VERSION

if [ -x "$OUT/kueue" ] && [ -f "$OUT/webhook/manifests.yaml" ]; then
  echo "$OUT"
  exit 0
fi
echo "kueue: building sigs.k8s.io/kueue/cmd/kueue@$VERSION (about 20 minutes cold on a loaded 2-core machine)" >&2
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(
  cd "$tmp"
  go mod init x >/dev/null 2>&1
  go get "sigs.k8s.io/kueue/cmd/kueue@$VERSION" >&2
  CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags '-s -w' -o "$tmp/kueue" sigs.k8s.io/kueue/cmd/kueue
)
src=$(cd "$tmp" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
mkdir -p "$OUT/crds" "$OUT/webhook"
cp "$src"/config/components/crd/bases/*.yaml "$OUT/crds/"
cp "$src"/config/components/webhook/manifests.yaml "$OUT/webhook/manifests.yaml"
chmod -R u+w "$OUT"
mv "$tmp/kueue" "$OUT/kueue"
echo "kueue: built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
