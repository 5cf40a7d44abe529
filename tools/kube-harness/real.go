// real.go starts the real tier beside the control plane (docs/real-tier.md): a node that runs
// containers (node-init's namespaces, containerd, the kubelet), kube-proxy and CoreDNS inside it,
// Traefik on the host, serving the preview hosts on two loopback ports (HTTP and HTTPS), and the
// CSI driver and controllers that give it volume snapshots (realcsi.go).
package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// realNode is what the real tier started, for readiness, the smoke check and stopping.
type realNode struct {
	paths     nodePaths
	bin       string // the build's bin/
	initPID   int
	webAddr   string // Traefik's preview entry point (web, plain HTTP)
	httpsAddr string // and its TLS one (websecure)
	pingAddr  string
	proxy     *apiProxy
	// admin is the control plane's admin kubeconfig (the smoke check's dynamic client).
	admin string
	// csi: the CSI driver, its sidecars and snapshot-controller run (realcsi.go).
	csi bool
}

// startReal starts the real node once the control plane is usable; server is the apiserver's
// loopback URL.
func (cp *controlPlane) startReal(ctx context.Context, cs *kubernetes.Clientset, server string) error {
	o := cp.opts
	n := &realNode{paths: nodePaths{root: filepath.Join(o.dir, "node")}, bin: filepath.Join(o.real, "bin"), admin: o.kubeconfig}
	cp.node = n
	if _, err := net.InterfaceByName(hostLink); err == nil {
		return fmt.Errorf("a real node is running on this host already (network link %s exists); stop it first (scripts/kube-harness stop)", hostLink)
	}
	removeStaleCgroups()
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "pki"} {
		if err := os.MkdirAll(n.paths.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := cp.startNodeInit(ctx, n); err != nil {
		return err
	}
	if err := setupNodeNetwork(n.initPID); err != nil {
		return fmt.Errorf("node network: %w", err)
	}
	apiPort, err := strconv.Atoi(server[strings.LastIndex(server, ":")+1:])
	if err != nil {
		return err
	}
	if n.proxy, err = startAPIProxy(net.JoinHostPort(hostIP, "0"), fmt.Sprintf("127.0.0.1:%d", apiPort)); err != nil {
		return fmt.Errorf("apiserver proxy for the node: %w", err)
	}
	if err := cp.writeNodeIdentities(n, server); err != nil {
		return err
	}
	if err := writeNodeConfigs(n, cp.pki); err != nil {
		return err
	}
	n.csi = csiEnabled(o.real)
	if err := setupRealCluster(ctx, cs, o.kubeconfig, n, o.real, o.nodes); err != nil {
		return err
	}
	if n.csi {
		if err := setupRealCSI(ctx, cs, o.kubeconfig); err != nil {
			return fmt.Errorf("CSI: %w", err)
		}
	}
	if err := cp.startNodeProcesses(ctx, n); err != nil {
		return err
	}
	if err := cp.poll(ctx, "real node ready", func() error { return realReady(ctx, cs, n) }); err != nil {
		return err
	}
	if !n.csi {
		return nil
	}
	// Only once Traefik listens: the CSI controllers' first connections to the apiserver take
	// loopback ports from the range Traefik's free ports were picked from.
	csiStart := time.Now()
	if err := cp.startCSI(ctx, n); err != nil {
		return fmt.Errorf("CSI: %w", err)
	}
	if err := cp.poll(ctx, "CSI driver registered", func() error { return csiReady(ctx, cs) }); err != nil {
		return err
	}
	logf("CSI driver registered with the kubelet %s after its start", time.Since(csiStart).Round(time.Millisecond))
	return nil
}

func (cp *controlPlane) startNodeInit(ctx context.Context, n *realNode) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ready := n.paths.path("init-ready")
	argv := []string{self, "node-init", ready, n.paths.path("created-dirs")}
	if err := cp.spawnArgv("node-init", argv, nil, nodeInitAttrs()); err != nil {
		return fmt.Errorf("cannot create the node's namespaces (PID, mount, network): %w", err)
	}
	if err := cp.poll(ctx, "node namespaces", func() error {
		_, err := os.Stat(ready)
		return err
	}); err != nil {
		return err
	}
	c, err := cp.named("node-init")
	if err != nil {
		return err
	}
	n.initPID = c.cmd.Process.Pid
	return nil
}

// setupNodeNetwork links the host to the node's network namespace (hostIP ↔ nodeIP) and routes
// the pods' and the Services' addresses to the node.
func setupNodeNetwork(pid int) error {
	p := strconv.Itoa(pid)
	inNS := func(args ...string) []string { return inNode(pid, append([]string{"ip"}, args...)...) }
	steps := [][]string{
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", "eth0", "netns", p},
		{"ip", "addr", "add", hostIP + linkCIDR, "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		inNS("link", "set", "lo", "up"),
		inNS("addr", "add", nodeIP+linkCIDR, "dev", "eth0"),
		inNS("link", "set", "eth0", "up"),
		{"ip", "route", "add", podCIDR, "via", nodeIP, "dev", hostLink},
		{"ip", "route", "add", serviceCIDR, "via", nodeIP, "dev", hostLink},
	}
	for _, argv := range steps {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// writeNodeIdentities issues the node's certificates and writes a kubeconfig for each identity:
// the kubelet (system:node:<name>), kube-proxy (system:kube-proxy) and CoreDNS reach the
// apiserver through the proxy on hostIP; Traefik, on the host, at its loopback address.
func (cp *controlPlane) writeNodeIdentities(n *realNode, server string) error {
	p := cp.pki
	pkiDir := n.paths.path("pki")
	if _, _, err := p.issue(filepath.Join(pkiDir, "kubelet-serving.crt"), filepath.Join(pkiDir, "kubelet-serving.key"), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + realNodeName, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{realNodeName},
		IPAddresses: []net.IP{net.ParseIP(nodeIP)},
	}); err != nil {
		return err
	}
	nodeServer := "https://" + n.proxy.addr
	for _, id := range []struct {
		who, cn, org, server string
	}{
		{"kubelet", "system:node:" + realNodeName, "system:nodes", nodeServer},
		{"kube-proxy", "system:kube-proxy", "", nodeServer},
		{"coredns", "sandcastle-harness:coredns", "", nodeServer},
		{"traefik", "sandcastle-harness:traefik", "", server},
	} {
		subject := pkix.Name{CommonName: id.cn}
		if id.org != "" {
			subject.Organization = []string{id.org}
		}
		certPEM, keyPEM, err := p.issue(filepath.Join(pkiDir, id.who+".crt"), filepath.Join(pkiDir, id.who+".key"), &x509.Certificate{
			Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
		if err := writeIdentityKubeconfig(n.paths.kubeconfig(id.who), id.server, p.caPEM, certPEM, keyPEM); err != nil {
			return err
		}
	}
	return nil
}

func writeNodeConfigs(n *realNode, p *pki) error {
	cni, err := cniConfig(n.paths)
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	n.webAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	n.httpsAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	n.pingAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	pkiDir := n.paths.path("pki")
	files := map[string]string{
		n.paths.containerdConfig():                                    containerdConfig(n.paths),
		filepath.Join(n.paths.cniConfDir(), "10-sandcastle.conflist"): cni,
		n.paths.kubeletConfig(): kubeletConfig(n.paths, filepath.Join(pkiDir, "kubelet-serving.crt"),
			filepath.Join(pkiDir, "kubelet-serving.key"), p.CACert),
		n.paths.kubeProxyConfig(): kubeProxyConfig(n.paths),
		n.paths.corefile():        corefile(n.paths.kubeconfig("coredns")),
		n.paths.traefikConfig():   traefikConfig(n.webAddr, n.httpsAddr, n.pingAddr),
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startNodeProcesses starts containerd (and imports the images), the kubelet, kube-proxy and
// CoreDNS inside the node, and Traefik on the host.
func (cp *controlPlane) startNodeProcesses(ctx context.Context, n *realNode) error {
	bin := func(name string) string { return filepath.Join(n.bin, name) }
	// The shim finds runc on PATH, containerd finds the shim next to itself.
	pathEnv := "PATH=" + n.bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if err := cp.spawnArgv("containerd", inNode(n.initPID, bin("containerd"), "--config", n.paths.containerdConfig()), []string{pathEnv}, nil); err != nil {
		return err
	}
	if err := cp.poll(ctx, "containerd socket", func() error {
		return exec.Command(bin("ctr"), "--address", n.paths.containerdSocket(), "version").Run()
	}); err != nil {
		return err
	}
	if err := importImages(n, filepath.Join(cp.opts.real, "images")); err != nil {
		return err
	}
	if err := cp.spawnArgv("kubelet", inNode(n.initPID, bin("kubelet"),
		"--config="+n.paths.kubeletConfig(),
		"--kubeconfig="+n.paths.kubeconfig("kubelet"),
		"--hostname-override="+realNodeName,
		"--node-ip="+nodeIP,
		"--root-dir="+n.paths.kubeletRoot(),
		"--node-labels="+realNodeLabel+"=true",
		"--v=1",
	), []string{pathEnv}, nil); err != nil {
		return err
	}
	if err := cp.spawnArgv("kube-proxy", inNode(n.initPID, bin("kube-proxy"),
		"--config="+n.paths.kubeProxyConfig(), "--v=1"), []string{pathEnv}, nil); err != nil {
		return err
	}
	if err := cp.spawnArgv("coredns", inNode(n.initPID, bin("coredns"), "-conf", n.paths.corefile()), nil, nil); err != nil {
		return err
	}
	return cp.spawnArgv("traefik", []string{bin("traefik"), "--configFile=" + n.paths.traefikConfig()},
		[]string{"KUBECONFIG=" + n.paths.kubeconfig("traefik")}, nil)
}

// importImages imports every docker-archive of dir into containerd's k8s.io namespace.
func importImages(n *realNode, dir string) error {
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil || len(tars) == 0 {
		return fmt.Errorf("no images in %s (scripts/kube-harness build --real builds them)", dir)
	}
	started := time.Now()
	for _, t := range tars {
		out, err := exec.Command(filepath.Join(n.bin, "ctr"), "--address", n.paths.containerdSocket(),
			"-n", "k8s.io", "images", "import", "--all-platforms", t).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s: %v: %s", t, err, strings.TrimSpace(string(out)))
		}
	}
	logf("imported %d images in %s", len(tars), time.Since(started).Round(time.Millisecond))
	return nil
}

// stopReal cleans up after the node's processes are gone: the node's cgroups, the host folders
// node-init created, and the host link should it still be there.
func (cp *controlPlane) stopReal() {
	n := cp.node
	if n == nil {
		return
	}
	if n.proxy != nil {
		n.proxy.close()
	}
	removeStaleCgroups()
	removeCreatedDirs(n.paths.path("created-dirs"))
	if _, err := net.InterfaceByName(hostLink); err == nil {
		_ = exec.Command("ip", "link", "del", hostLink).Run()
	}
}

// writeRealEnv writes <dir>/real.env, the export lines `scripts/kube-harness start --real`
// prints besides KUBECONFIG.
func (cp *controlPlane) writeRealEnv() error {
	n := cp.node
	lines := []string{
		"SANDCASTLE_INGRESS_HTTP=" + n.webAddr,
		"SANDCASTLE_INGRESS_HTTPS=" + n.httpsAddr,
		"SANDCASTLE_REAL_NODE=" + realNodeName,
		"SANDCASTLE_CONTAINERD_ADDRESS=" + n.paths.containerdSocket(),
		"SANDCASTLE_CTR=" + filepath.Join(n.bin, "ctr"),
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("export " + l + "\n")
	}
	return os.WriteFile(filepath.Join(cp.opts.dir, "real.env"), []byte(b.String()), 0o600)
}
