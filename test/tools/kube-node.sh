#!/usr/bin/env bash
# Prints the folder that holds kubelet and kube-scheduler, for the sandbox's
# real node (--node=real). k8s-assets.sh builds them in the same go build as
# kube-apiserver and kube-controller-manager, so the packages the four share
# compile once; this only checks they are there.
set -euo pipefail
DIR=$("$(dirname "$0")/k8s-assets.sh")
for b in kubelet kube-scheduler; do
  [ -x "$DIR/$b" ] || { echo "kube-node: $b is missing from $DIR" >&2; exit 1; }
done
echo "$DIR"
