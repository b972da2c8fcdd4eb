#!/usr/bin/env bash
# Builds the real-cluster test bed (docs/real-cluster.md) from two Go modules, each into a cache
# outside the clone keyed by a hash of its sources (go.mod, go.sum, *.go) and this script:
#   test/real-cluster        kube-apiserver, kube-controller-manager, kube-scheduler v1.37.2, the
#                            konnectivity server and agent (apiserver-network-proxy v0.36.0), and
#                            the etcd launcher, node stand-in and PKI generator (used by both)
#   test/real-cluster-v1.34  kube-apiserver, kube-controller-manager, kube-scheduler v1.34.4
# `build.sh v1.34` (or v1.37) builds one of them only. Quick and idempotent when built.
set -euo pipefail
cd "$(dirname "$0")/.."

cache_base="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-proxyout"
# test/helpers/real-cluster-build.ts (buildKey) computes the same key: keep the two in step.
module_key() {
  { (cd "$1" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort | xargs sha256sum); (cd real-cluster && sha256sum build.sh); } | sha256sum | cut -c1-16
}

# build_module DIR (under test/) CACHE_ROOT NAME=PACKAGE...
build_module() {
  local dir=$1 cache_root=$2 key out tmp kube_version major minor ldflags start t0 name pkg
  shift 2
  key=$(module_key "$dir")
  out="$cache_root/$key"
  if [ -f "$out/.complete" ]; then
    touch "$out/.complete" # last used: what the pruning below goes by
    echo "real-cluster test bed (test/$dir): built ($out)"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "real-cluster test bed: go is not on PATH; cannot build" >&2
    exit 1
  fi
  echo "real-cluster test bed (test/$dir): building into $out ($(go version))"
  start=$(date +%s)
  mkdir -p "$out"
  tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
  trap "rm -rf '$tmp'" EXIT
  # The version the binaries report (/version, the version metric), as upstream's release build sets it.
  kube_version=$(go -C "$dir" list -m -f '{{.Version}}' k8s.io/kubernetes)
  major=${kube_version#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  for spec in "$@"; do
    name=${spec%%=*}; pkg=${spec#*=}
    t0=$(date +%s)
    go -C "$dir" build -trimpath -ldflags="$ldflags" -o "$tmp/$name" "$pkg"
    echo "  $name: $(( $(date +%s) - t0 )) s"
  done
  mv "$tmp"/* "$out"/
  touch "$out/.complete"
  rm -rf "$tmp"
  trap - EXIT
  # Each key's binaries take ~250–380 MB. Other checkouts and worktrees use other keys at the same
  # time, so none is pruned for being older than this one: only keys no build used for 30 days.
  find "$cache_root" -mindepth 2 -maxdepth 2 -name .complete -mtime +30 -printf '%h\n' | xargs -r rm -rf
  echo "real-cluster test bed (test/$dir): built in $(( $(date +%s) - start )) s ($out)"
}

for version in ${*:-v1.37 v1.34}; do
  case $version in
    v1.37) build_module real-cluster "$cache_base/real-cluster" \
      proxyout-pki=./cmd/proxyout-pki proxyout-etcd=./cmd/proxyout-etcd proxyout-node=./cmd/proxyout-node \
      proxyout-grpc-client=./cmd/proxyout-grpc-client \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      proxy-server=sigs.k8s.io/apiserver-network-proxy/cmd/server proxy-agent=sigs.k8s.io/apiserver-network-proxy/cmd/agent ;;
    v1.34) build_module real-cluster-v1.34 "$cache_base/real-cluster-v1.34" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler ;;
    *) echo "usage: build.sh [v1.37] [v1.34] (default both)" >&2; exit 2 ;;
  esac
done
