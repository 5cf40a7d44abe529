package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func hostOK() hostFacts {
	return hostFacts{
		goos: "linux", euid: 0, filesystems: "nodev\tproc\nnodev\toverlay\n",
		hasFile: func(string) bool { return true }, lookPath: func(string) bool { return true },
	}
}

// Each missing piece is named in one sentence; a complete host passes.
func TestRealHostProblem(t *testing.T) {
	if err := realHostProblem(hostOK()); err != nil {
		t.Fatalf("complete host: %v", err)
	}
	cases := map[string]func(*hostFacts){
		"needs Linux":         func(h *hostFacts) { h.goos = "darwin" },
		"needs root":          func(h *hostFacts) { h.euid = 1000 },
		"needs overlayfs":     func(h *hostFacts) { h.filesystems = "nodev\tproc\n" },
		"needs cgroups":       func(h *hostFacts) { h.hasFile = func(p string) bool { return !strings.HasPrefix(p, "/sys/fs/cgroup") } },
		"namespaces":          func(h *hostFacts) { h.hasFile = func(p string) bool { return !strings.HasPrefix(p, "/proc/self/ns") } },
		"nftables":            func(h *hostFacts) { h.lookPath = func(n string) bool { return n != "nft" } },
		"CNI plugin":          func(h *hostFacts) { h.hasFile = func(p string) bool { return !strings.HasSuffix(p, "/bridge") } },
		"Debian package runc": func(h *hostFacts) { h.lookPath = func(n string) bool { return n != "runc" } },
	}
	for want, change := range cases {
		h := hostOK()
		change(&h)
		err := realHostProblem(h)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), ". ") > 0 {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

// The settings these hosts need are in the configuration files, and the files parse.
func TestRealConfigs(t *testing.T) {
	n := nodePaths{root: "/run-dir/node"}
	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(kubeletConfig(n, "c", "k", "ca")), &kubelet); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "failSwapOn": false,
		"containerRuntimeEndpoint":    "unix:///run-dir/node/containerd/containerd.sock",
		"imageGCHighThresholdPercent": float64(100),
	} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}
	if dns := kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != dnsServiceIP {
		t.Errorf("clusterDNS %v", dns)
	}
	c := containerdConfig(n)
	for _, want := range []string{"version = 3", "restrict_oom_score_adj = true", "SystemdCgroup = false",
		`snapshotter = "overlayfs"`, `bin_dirs = ["/usr/lib/cni"]`, `sandbox = "sandcastle.test/pause:1"`,
		`conf_dir = "/run-dir/node/cni/net.d"`} {
		if !strings.Contains(c, want) {
			t.Errorf("containerd config lacks %s", want)
		}
	}
	cni, err := cniConfig(n)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type   string `json:"type"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cni), &conf); err != nil {
		t.Fatal(err)
	}
	if p := conf.Plugins[0]; p.Type != "bridge" || p.IPMasq || p.IPAM.Ranges[0][0]["subnet"] != podCIDR {
		t.Errorf("cni %+v", p)
	}
	var proxy map[string]any
	if err := yaml.Unmarshal([]byte(kubeProxyConfig(n)), &proxy); err != nil {
		t.Fatal(err)
	}
	if proxy["mode"] != "nftables" || proxy["clusterCIDR"] != podCIDR {
		t.Errorf("kube-proxy %v", proxy)
	}
	if !strings.Contains(corefile("/k"), "kubernetes cluster.local") {
		t.Error("Corefile does not serve cluster.local")
	}
}

// Traefik serves previews on web (HTTP) and websecure (TLS for every router there), both default
// entry points (ping is not), and reads Ingresses, the Gateway API and its own Middlewares.
func TestTraefikConfig(t *testing.T) {
	var traefik struct {
		EntryPoints map[string]struct {
			Address   string `json:"address"`
			AsDefault bool   `json:"asDefault"`
			HTTP      *struct {
				TLS *map[string]any `json:"tls"`
			} `json:"http"`
		} `json:"entryPoints"`
		Providers map[string]map[string]any `json:"providers"`
	}
	if err := yaml.Unmarshal([]byte(traefikConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")), &traefik); err != nil {
		t.Fatal(err)
	}
	web, secure, ping := traefik.EntryPoints["web"], traefik.EntryPoints["websecure"], traefik.EntryPoints["ping"]
	if web.Address != "127.0.0.1:1" || !web.AsDefault || web.HTTP != nil {
		t.Errorf("web %+v", web)
	}
	if secure.Address != "127.0.0.1:2" || !secure.AsDefault || secure.HTTP == nil || secure.HTTP.TLS == nil {
		t.Errorf("websecure %+v", secure)
	}
	if ping.Address != "127.0.0.1:3" || ping.AsDefault {
		t.Errorf("ping %+v", ping)
	}
	ingress, gateway, crd := traefik.Providers["kubernetesIngress"], traefik.Providers["kubernetesGateway"], traefik.Providers["kubernetesCRD"]
	if ingress["allowExternalNameServices"] != true || ingress["allowEmptyServices"] != true {
		t.Errorf("kubernetesIngress %v", ingress)
	}
	if gateway == nil || gateway["experimentalChannel"] != false {
		t.Errorf("kubernetesGateway %v", gateway)
	}
	if crd["allowCrossNamespace"] != false || crd["allowExternalNameServices"] != true || crd["allowEmptyServices"] != true {
		t.Errorf("kubernetesCRD %v", crd)
	}
}

// Traefik may read every traefik.io kind its CRD provider watches, and write none.
func TestTraefikRole(t *testing.T) {
	var traefikIO []string
	for _, r := range roles()["traefik"] {
		if slices.Contains(r.APIGroups, "traefik.io") {
			if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
				t.Errorf("traefik.io verbs %v", r.Verbs)
			}
			traefikIO = append(traefikIO, r.Resources...)
		}
	}
	for _, want := range []string{"middlewares", "ingressroutes", "traefikservices", "tlsoptions", "tlsstores",
		"serverstransports", "serverstransporttcps", "middlewaretcps", "ingressroutetcps", "ingressrouteudps"} {
		if !slices.Contains(traefikIO, want) {
			t.Errorf("traefik cannot read %s.traefik.io", want)
		}
	}
}

// A file of several YAML documents gives one CRD each; empty documents are skipped; anything
// but a CRD is refused.
func TestCRDFiles(t *testing.T) {
	dir := t.TempDir()
	crd := func(name string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yml"), []byte(crd("a.example.io")+"---\n---\n"+crd("b.example.io")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("---\n"+crd("c.example.io")), 0o600); err != nil {
		t.Fatal(err)
	}
	crds, err := crdFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.example.io", "b.example.io", "c.example.io"}) {
		t.Errorf("names %v", names)
	}
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := crdFiles(dir); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("a ConfigMap among CRDs: %v", err)
	}
	if _, err := crdFiles(t.TempDir()); err == nil {
		t.Error("an empty folder gave no error")
	}
}

// The smoke's auth server answers 401 with a header and a body without X-Smoke: yes, 200 with
// it, and tells what Traefik sent.
func TestSmokeAuthHandler(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-Forwarded-Method", "GET")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", smokeAuthHost)
	req.Header.Set("X-Forwarded-Uri", "/healthz")
	rec := httptest.NewRecorder()
	smokeAuthHandler(rec, req)
	if rec.Code != http.StatusUnauthorized || rec.Body.String() != smokeAuthBody || rec.Header().Get("WWW-Authenticate") == "" ||
		rec.Header().Get("X-Smoke-Saw") != "GET GET https "+smokeAuthHost+" /healthz" {
		t.Errorf("without X-Smoke: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	req.Header.Set("X-Smoke", "yes")
	rec = httptest.NewRecorder()
	smokeAuthHandler(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("with X-Smoke: %d", rec.Code)
	}
}

// The smoke's certificate is valid for any *.preview.localhost host under its own CA, and usable
// as a Secret's tls.crt and tls.key.
func TestSmokeCert(t *testing.T) {
	pool, certPEM, keyPEM, err := smokeCert()
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{smokeTLSHost, smokeGatewayHost} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "preview.localhost"}); err == nil {
		t.Error("the wildcard matched its parent domain")
	}
}

// The cgroup trees go deepest first; other folders stay.
func TestRemoveCgroupTrees(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/kubepods/burstable/pod1/c1", "cpu/kubepods/besteffort", "memory/other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if left := removeCgroupTrees(root, "kubepods"); left != 0 {
		t.Errorf("%d left", left)
	}
	for _, d := range []string{"memory/kubepods", "cpu/kubepods"} {
		if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
			t.Errorf("%s still there", d)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "memory/other")); err != nil {
		t.Errorf("memory/other: %v", err)
	}
}
