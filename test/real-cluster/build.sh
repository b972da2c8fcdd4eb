#!/usr/bin/env bash
# Builds the real-cluster test bed (docs/real-cluster.md): kube-apiserver, kube-controller-manager
# and kube-scheduler from k8s.io/kubernetes, and this module's etcd launcher, node stand-in and
# PKI generator, into a cache outside the clone keyed by a hash of this module's sources
# (go.mod, go.sum, *.go, this script). Quick and idempotent when that key is already built.
set -euo pipefail
cd "$(dirname "$0")"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-proxyout/real-cluster"
# test/helpers/real-cluster.ts computes the same key: keep the two in step.
key=$(find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh \) | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
out="$cache_root/$key"
if [ -f "$out/.complete" ]; then
  touch "$out/.complete" # last used: what the pruning below goes by
  echo "real-cluster test bed: built ($out)"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "real-cluster test bed: go is not on PATH; cannot build" >&2
  exit 1
fi

echo "real-cluster test bed: building into $out ($(go version))"
start=$(date +%s)
mkdir -p "$out"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The version the binaries report (/version, the version metric), as upstream's release build sets it.
kube_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${kube_version#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
build() {
  local name=$1 pkg=$2 t0
  t0=$(date +%s)
  go build -trimpath -ldflags="$ldflags" -o "$tmp/$name" "$pkg"
  echo "  $name: $(( $(date +%s) - t0 )) s"
}
build proxyout-pki ./cmd/proxyout-pki
build proxyout-etcd ./cmd/proxyout-etcd
build proxyout-node ./cmd/proxyout-node
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
mv "$tmp"/* "$out"/
touch "$out/.complete"
# Each key's binaries take ~300 MB. Other checkouts and worktrees use other keys at the same time,
# so none is pruned for being older than this one: only keys no build has used for 30 days.
find "$cache_root" -mindepth 2 -maxdepth 2 -name .complete -mtime +30 -printf '%h\n' | xargs -r rm -rf
echo "real-cluster test bed: built in $(( $(date +%s) - start )) s ($out)"
