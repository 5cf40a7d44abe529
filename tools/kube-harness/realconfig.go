// realconfig.go holds the real node's addresses and writes its components' configuration files:
// containerd's, the CNI network's, the kubelet's, kube-proxy's, CoreDNS's Corefile and
// Traefik's. Each is a pure function of its inputs.
package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

const (
	// realNodeName is the real node's name.
	realNodeName = "real-node-0"
	// hostLink is the host's end of the link to the node's network namespace; one real node per
	// host (this name, the addresses and the routes below are the host's).
	hostLink = "sc-real0"
	// hostIP and nodeIP are the two ends of that link; nodeIP is the node's InternalIP.
	hostIP   = "10.98.0.1"
	nodeIP   = "10.98.0.2"
	linkCIDR = "/30"
	// podCIDR is the real node's pod network (kwok's fake pods use 10.244.0.0/16), podGateway the
	// bridge's address in it.
	podCIDR    = "10.245.0.0/24"
	podGateway = "10.245.0.1"
	// serviceCIDR is the apiserver's --service-cluster-ip-range; dnsServiceIP is kube-dns's.
	serviceCIDR  = "10.0.0.0/16"
	dnsServiceIP = "10.0.0.10"
	// cniBinDir holds Debian's CNI plugins.
	cniBinDir = "/usr/lib/cni"
	// sandboxImage is the pause image the node's pod sandboxes run.
	sandboxImage = "sandcastle.test/pause:1"
	// realNodeLabel marks the real node; fakeNodeTaint keeps workloads off the fake nodes when a
	// real node is there (pods that want a fake node tolerate it).
	realNodeLabel = "sandcastle.dev/real-node"
	fakeNodeTaint = "sandcastle.dev/fake-node"
)

// nodePaths are the real node's files, all under <dir>/node.
type nodePaths struct {
	root string
}

func (n nodePaths) path(parts ...string) string {
	return filepath.Join(append([]string{n.root}, parts...)...)
}
func (n nodePaths) containerdConfig() string { return n.path("containerd.toml") }
func (n nodePaths) containerdSocket() string { return n.path("containerd", "containerd.sock") }
func (n nodePaths) cniConfDir() string       { return n.path("cni", "net.d") }
func (n nodePaths) kubeletConfig() string    { return n.path("kubelet.yaml") }
func (n nodePaths) kubeletRoot() string      { return n.path("kubelet") }
func (n nodePaths) kubeProxyConfig() string  { return n.path("kube-proxy.yaml") }
func (n nodePaths) corefile() string         { return n.path("Corefile") }
func (n nodePaths) traefikConfig() string    { return n.path("traefik.yaml") }
func (n nodePaths) kubeconfig(who string) string {
	return n.path("kubeconfig-" + who)
}

func containerdConfig(n nodePaths) string {
	return fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  # Root lacks CAP_SYS_RESOURCE on these hosts: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = %q

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%q]
  conf_dir = %q
  max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(),
		n.containerdSocket()+".ttrpc", sandboxImage, n.path("containerd", "runc"), cniBinDir, n.cniConfDir())
}

// cniConfig is the pods' network: a bridge in the node's network namespace, addresses from
// podCIDR, no masquerading (nothing leaves for the outside).
func cniConfig(n nodePaths) (string, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "sandcastle",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": podCIDR, "gateway": podGateway}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": n.path("cni", "ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b), err
}

func kubeletConfig(n nodePaths, tlsCert, tlsKey, clientCA string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These hosts run cgroup v1, which kubelet 1.35+ refuses unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
failSwapOn: false
readOnlyPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
makeIPTablesUtilChains: false
clusterDNS: [%s]
clusterDomain: cluster.local
podLogsDir: %s
serializeImagePulls: false
# The images are imported, never pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
syncFrequency: 10s
nodeStatusReportFrequency: 1m0s
containerLogMaxSize: 10Mi
`, n.containerdSocket(), tlsCert, tlsKey, clientCA, dnsServiceIP, n.path("pod-logs"))
}

func kubeProxyConfig(n nodePaths) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: nftables
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  # Leave the host-wide conntrack table alone.
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.kubeconfig("kube-proxy"), realNodeName, podCIDR, nodeIP)
}

// corefile serves cluster.local from the API; other names are not answered (pods have no way
// out of the node anyway).
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    errors
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s kube-harness
        pods insecure
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
    loadbalance
}
`, kubeconfig)
}

// traefikConfig is Traefik's static configuration: preview hosts on webAddr (plain HTTP) and
// httpsAddr (TLS: every router gets TLS there, its certificate chosen by SNI from the Secrets
// Ingresses and Gateways name), /ping on pingAddr; Ingresses, the Gateway API and Traefik's own
// resources (Middlewares for forwardAuth) from the cluster (KUBECONFIG in its environment).
// web and websecure are the default entry points, so a router without entry points (an
// Ingress's) is served on both and not on ping.
func traefikConfig(webAddr, httpsAddr, pingAddr string) string {
	return strings.TrimLeft(fmt.Sprintf(`
global:
  checkNewVersion: false
  sendAnonymousUsage: false
entryPoints:
  web:
    address: %q
    asDefault: true
  websecure:
    address: %q
    asDefault: true
    http:
      tls: {}
  ping:
    address: %q
ping:
  entryPoint: ping
log:
  level: INFO
  noColor: true
accessLog: {}
providers:
  kubernetesIngress:
    allowExternalNameServices: true
    allowEmptyServices: true
  kubernetesGateway:
    experimentalChannel: false
  kubernetesCRD:
    allowCrossNamespace: false
    allowExternalNameServices: true
    allowEmptyServices: true
`, webAddr, httpsAddr, pingAddr), "\n")
}
