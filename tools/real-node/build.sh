# The real tier's build (docs/real-tier.md), sourced by scripts/kube-harness, which sets root,
# src (tools/kube-harness), cache, k8s_version and say. Every output is cached under
# $cache/real by a hash of its inputs; `real_build` prints the directory `up --real` takes.
real_src="$root/tools/real-node"
# shellcheck source=versions.env
. "$real_src/versions.env"

# The Debian packages the node needs at run time, installed when missing.
real_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  for p in bridge host-local loopback; do [ -x "/usr/lib/cni/$p" ] || { missing+=(containernetworking-plugins); break; }; done
  command -v nft >/dev/null || missing+=(nftables)
  [ -x /bin/busybox ] || missing+=(busybox-static)
  command -v redis-check-rdb >/dev/null || missing+=(redis-tools)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "the real tier needs the Debian packages ${missing[*]}; install them (as root: apt-get install ${missing[*]})"
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

# module_copy MODULE VERSION DEST: a writable copy of a module from the module cache, downloaded
# through the module proxy when missing.
module_copy() {
  local dir
  dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -d "$dir" ] || { say "go mod download $1@$2 failed"; exit 1; }
  rm -rf "$3"
  mkdir -p "$(dirname "$3")"
  cp -a "$dir" "$3"
  chmod -R u+w "$3"
}

# upstream NAME MODULE VERSION TAGS LDFLAGS PACKAGE...: build packages of a project in a copy of
# its own module, with its own go.mod and go.sum (their dependency graphs differ from the control
# plane's and from each other's: one merged go.mod could not satisfy them all).
upstream() {
  local name=$1 mod=$2 ver=$3 tags=$4 ldflags=$5
  shift 5
  local out="$cache/real/$name-$ver"
  [ -f "$out/.done" ] && return 0
  local work="$cache/real/src/$name-$ver"
  say "building $name $ver from its Go module (cached afterwards)"
  local start=$SECONDS
  module_copy "$mod" "$ver" "$work"
  # upstream_edit (set for one call): go.mod edits the module copy needs before it builds.
  # shellcheck disable=SC2086 # several go mod edit flags, split on purpose
  if [ -n "${upstream_edit:-}" ]; then (cd "$work" && go mod edit $upstream_edit); fi
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out.tmp/" "$@")
  rm -rf "$out" "$work"
  mv "$out.tmp" "$out"
  touch "$out/.done"
  say "built $name $ver in $((SECONDS - start))s"
}

# kubelet and kube-proxy from the control plane's own module and go.sum (its `tool` directives).
real_kubernetes() {
  local out; out="$cache/real/kubernetes-$(cd "$src" && hash_of go.mod go.sum)"
  if [ ! -f "$out/.done" ]; then
    say "building kubelet and kube-proxy $k8s_version (cached afterwards)"
    local start=$SECONDS
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    (cd "$src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
      go build -trimpath -ldflags "-s -w$(version_ldflags)" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
    mv "$out.tmp" "$out"
    touch "$out/.done"
    say "built kubelet and kube-proxy in $((SECONDS - start))s"
  fi
  printf '%s' "$out"
}

# The images the node runs, as docker-archives (docs/real-tier.md lists them).
real_images() {
  local redis; redis=$(readlink -f "$(command -v redis-check-rdb)")
  local libs; libs=$(ldd "$redis" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}')
  local inputs=("$real_src"/go.mod "$real_src"/versions.env "$real_src"/build.sh /bin/busybox "$redis")
  mapfile -t -O "${#inputs[@]}" inputs < <(find "$real_src" -name '*.go' | LC_ALL=C sort)
  for l in $libs; do inputs+=("$(readlink -f "$l")"); done
  local out; out="$cache/real/images-$(hash_of "${inputs[@]}")"
  if [ -f "$out/.done" ]; then printf '%s' "$out"; return 0; fi
  say "building the test images"
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp/bin"
  (cd "$real_src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go build -trimpath -ldflags "-s -w" -o "$out.tmp/bin/" ./testapp ./pause ./mkimage)
  local mk="$out.tmp/bin/mkimage" busybox_links=()
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || busybox_links+=(-symlink "/bin/$a=busybox"); done
  "$mk" -o "$out.tmp/pause.tar" -tag sandcastle.test/pause:1 -add "$out.tmp/bin/pause:/pause:0755" -entrypoint /pause
  "$mk" -o "$out.tmp/busybox.tar" -tag sandcastle.test/busybox:1 -add /bin/busybox:/bin/busybox:0755 \
    "${busybox_links[@]}" -dir /tmp:1777 -cmd sh
  for c in c1 c2 c3; do
    "$mk" -o "$out.tmp/app-$c.tar" -tag "sandcastle.test/app:$c" -add "$out.tmp/bin/testapp:/app:0755" \
      -add /bin/busybox:/bin/busybox:0755 "${busybox_links[@]}" -dir /tmp:1777 \
      -env "APP_COMMIT=$c" -label "org.opencontainers.image.revision=$c" -entrypoint /app
  done
  local lib_args=()
  for l in $libs; do lib_args+=(-add "$l:$l:0755"); done
  "$mk" -o "$out.tmp/redis.tar" -tag sandcastle.test/redis:7 -add "$redis:/usr/bin/redis-server:0755" "${lib_args[@]}" \
    -dir /data -dir /tmp:1777 -entrypoint /usr/bin/redis-server -cmd --protected-mode -cmd no -cmd --dir -cmd /data
  rm -rf "$out"
  mv "$out.tmp" "$out"
  touch "$out/.done"
  printf '%s' "$out"
}

# real_csi: the CSI sidecars and the snapshot controller (docs/real-tier.md, "Volumes and
# snapshots"), each from its own module. The CSI driver itself is `kube-harness csi-hostpath`.
real_csi() {
  upstream csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 "$CSI_PROVISIONER_VERSION" "" \
    "-X main.version=$CSI_PROVISIONER_VERSION" ./cmd/csi-provisioner
  # external-snapshotter's go.mod replaces its client module with ./client, a folder its module
  # zip leaves out (a nested module): take that module from the proxy at the same tag instead.
  upstream_edit="-dropreplace=github.com/kubernetes-csi/external-snapshotter/client/v8 \
-require=github.com/kubernetes-csi/external-snapshotter/client/v8@$SNAPSHOTTER_VERSION" \
    upstream external-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 "$SNAPSHOTTER_VERSION" "" \
    "-X main.version=$SNAPSHOTTER_VERSION" ./cmd/csi-snapshotter ./cmd/snapshot-controller
}

# real_build: build (or find) everything and print the directory holding bin/, images/ and the
# CRDs `up --real` installs (gateway-crds/, traefik-crds/, snapshot-crds/).
real_build() {
  command -v go >/dev/null || { say "Go >= 1.26 is required to build the real tier"; exit 1; }
  real_packages
  local start=$SECONDS
  local k8s; k8s=$(real_kubernetes)
  upstream containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" no_btrfs \
    "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr
  upstream coredns github.com/coredns/coredns "$COREDNS_VERSION" "" \
    "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" .
  upstream traefik github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" "" \
    "-X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" ./cmd/traefik
  real_csi
  local gateway
  gateway=$(cd / && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$gateway/config/crd/standard" ] || { say "no Gateway API CRDs in sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION"; exit 1; }
  # Traefik's own CRDs (traefik.io: Middleware, IngressRoute, ...) for its kubernetesCRD provider,
  # from the same module it is built from (one file, a YAML document per CRD).
  local traefik_crds
  traefik_crds=$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml
  [ -f "$traefik_crds" ] || { say "no Traefik CRDs in github.com/traefik/traefik/v3@$TRAEFIK_VERSION"; exit 1; }
  # The VolumeSnapshot CRDs (snapshot.storage.k8s.io/v1) from the client module of the same
  # external-snapshotter release as the sidecar and controller.
  local snapshot_crds
  snapshot_crds=$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/v8@$SNAPSHOTTER_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/config/crd
  [ -f "$snapshot_crds/snapshot.storage.k8s.io_volumesnapshots.yaml" ] || { say "no VolumeSnapshot CRDs in external-snapshotter/client/v8@$SNAPSHOTTER_VERSION"; exit 1; }
  local images; images=$(real_images)
  local set; set="$cache/real/node-$(printf '%s\n' "$k8s" "$CONTAINERD_VERSION" "$COREDNS_VERSION" "$TRAEFIK_VERSION" "$images" "$gateway" "$traefik_crds" \
    "$CSI_PROVISIONER_VERSION" "$SNAPSHOTTER_VERSION" "$snapshot_crds" | sha256sum | cut -c1-16)"
  if [ ! -d "$set" ]; then
    rm -rf "$set.tmp"
    mkdir -p "$set.tmp/bin"
    ln -s "$k8s/kubelet" "$k8s/kube-proxy" "$set.tmp/bin/"
    ln -s "$cache/real/containerd-$CONTAINERD_VERSION"/* "$cache/real/coredns-$COREDNS_VERSION/coredns" \
      "$cache/real/traefik-$TRAEFIK_VERSION/traefik" "$set.tmp/bin/"
    ln -s "$cache/real/csi-provisioner-$CSI_PROVISIONER_VERSION/csi-provisioner" \
      "$cache/real/external-snapshotter-$SNAPSHOTTER_VERSION"/* "$set.tmp/bin/"
    ln -s "$images" "$set.tmp/images"
    mkdir "$set.tmp/snapshot-crds"
    for f in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
      cp "$snapshot_crds/snapshot.storage.k8s.io_$f.yaml" "$set.tmp/snapshot-crds/"
    done
    cp -r "$gateway/config/crd/standard" "$set.tmp/gateway-crds"
    mkdir "$set.tmp/traefik-crds"
    cp "$traefik_crds" "$set.tmp/traefik-crds/traefik.io.yaml"
    rm -rf "$set"
    mv "$set.tmp" "$set"
  fi
  [ $((SECONDS - start)) -gt 1 ] && say "real tier ready in $((SECONDS - start))s: $set"
  printf '%s' "$set"
}
