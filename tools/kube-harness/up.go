// up.go starts a whole control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok) as child processes of this binary on free loopback ports, waits until the
// cluster is usable, writes a kubeconfig and a ready file, and stops every child on SIGTERM.
// SIGUSR1 restarts kube-apiserver (stop, start with the same flags, wait for /readyz) and then
// writes the number of restarts so far into <dir>/apiserver-restarts: the fault a chaos run
// injects. SIGUSR2 stops kube-apiserver and leaves it stopped (<dir>/apiserver-down says so)
// until the next SIGUSR1 starts it again: a cluster that is away for a while.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kwokclient "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
)

type upOptions struct {
	dir        string
	kubeconfig string
	readyFile  string
	stages     stringList
	assets     string
	smoke      bool
	nodes      int
	profiling  bool
	timeout    time.Duration
	// real is the real tier's build (bin/, images/, gateway-crds/, traefik-crds/;
	// scripts/kube-harness build --real): when set, a node that runs containers joins the
	// cluster (real.go).
	real string
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runUp(args []string) int {
	var o upOptions
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "working directory for data, certificates and logs (default: a new temporary directory)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default: <dir>/kubeconfig)")
	fs.StringVar(&o.readyFile, "ready-file", "", "file written (containing the kubeconfig path) once the cluster is ready")
	fs.Var(&o.stages, "stages", "extra kwok Stage YAML file or directory of *.yaml files, loaded besides kwok's defaults (repeatable)")
	fs.StringVar(&o.assets, "assets", "", "directory of envtest-style binaries (etcd, kube-apiserver, ...) used in place of the built-in components it holds")
	fs.BoolVar(&o.smoke, "smoke", false, "also prove the whole chain: a Deployment becomes Available, a Job completes, a namespace is deleted")
	fs.BoolVar(&o.profiling, "profiling", false, "serve kube-apiserver's CPU profile (/debug/pprof) to the admin, for benchmarks that ask where its time went")
	fs.IntVar(&o.nodes, "nodes", 1, "how many fake nodes to create: kwok-node-0..N-1, in zones local-1a, local-1b, local-1c in turn")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the cluster to become ready")
	fs.StringVar(&o.real, "real", "", "directory of the real tier's build (bin/, images/, gateway-crds/, traefik-crds/): also run a node that runs containers, kube-proxy, CoreDNS and Traefik")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.nodes < 1 {
		fmt.Fprintf(os.Stderr, "kube-harness up: --nodes must be at least 1, not %d\n", o.nodes)
		return 2
	}
	if o.real != "" {
		if err := realHostProblem(realHostFacts()); err != nil {
			fmt.Fprintln(os.Stderr, "kube-harness up:", err)
			return 1
		}
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "kube-harness-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "kube-harness up:", err)
			return 1
		}
		o.dir = d
	}
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(o.dir, "kubeconfig")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cp := &controlPlane{opts: o}
	err := cp.start(ctx)
	if err == nil {
		logf("ready: KUBECONFIG=%s", o.kubeconfig)
		err = cp.wait(ctx)
	}
	cp.shutdown()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kube-harness up:", err)
		cp.dumpLogs()
		return 1
	}
	return 0
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kube-harness %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

type child struct {
	name    string
	args    []string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	// Set before a deliberate stop (a restart): its exit is expected, not a failure.
	restarting bool
}

type controlPlane struct {
	opts     upOptions
	mu       sync.Mutex
	children []*child
	exited   chan *child
	pki      *pki
	// node is the real node, when there is one.
	node *realNode
	// The API's address and a client trusting its certificate, for waiting on /readyz.
	server    string
	tlsClient *http.Client
	restarts  int
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

func freePorts(n int) ([]int, error) {
	// Hold all listeners open until every port is chosen, so the same port is not handed out twice.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (cp *controlPlane) spawn(name string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	if cp.opts.assets != "" {
		if p := filepath.Join(cp.opts.assets, name); isExecutable(p) {
			cmd = exec.Command(p, args...)
		}
	}
	return cp.run(name, args, cmd)
}

// spawnArgv starts argv as child name, with env added to this process's environment and attrs
// (nil: the default, a process group of its own that dies with this supervisor).
func (cp *controlPlane) spawnArgv(name string, argv, env []string, attrs *syscall.SysProcAttr) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = attrs
	return cp.run(name, argv[1:], cmd)
}

// run starts cmd as child name, logging to <dir>/logs/<name>.log, and tracks it.
func (cp *controlPlane) run(name string, args []string, cmd *exec.Cmd) error {
	logPath := filepath.Join(cp.opts.dir, "logs", name+".log")
	// Appended to: a restarted component keeps its earlier lines.
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout = f
	cmd.Stderr = f
	// If this supervisor dies without a chance to clean up, the kernel kills the children.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, args: args, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	cp.mu.Lock()
	replaced := false
	for i, old := range cp.children {
		if old.name == name {
			cp.children[i] = c
			replaced = true
		}
	}
	if !replaced {
		cp.children = append(cp.children, c)
	}
	cp.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
		cp.exited <- c
	}()
	logf("started %s (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return nil
}

func (cp *controlPlane) start(runCtx context.Context) error {
	o := cp.opts
	cp.exited = make(chan *child, 32)
	for _, sub := range []string{"logs", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(o.dir, sub), 0o700); err != nil {
			return err
		}
	}
	started := time.Now()
	// Start-up steps are bounded by the timeout; what keeps running (the provisioner) lives as
	// long as the control plane.
	ctx, cancel := context.WithTimeout(runCtx, o.timeout)
	defer cancel()

	p, err := generatePKI(filepath.Join(o.dir, "pki"))
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	cp.pki = p
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort, kwokPort := ports[0], ports[1], ports[2], ports[3]
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := writeKubeconfig(o.kubeconfig, server, p); err != nil {
		return err
	}
	stagesFile := filepath.Join(o.dir, "kwok-stages.yaml")
	if err := writeStages(stagesFile, o.stages); err != nil {
		return err
	}

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	if err := cp.spawn("etcd",
		"--name=harness",
		"--data-dir="+filepath.Join(o.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=harness="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
		"--quota-backend-bytes=4294967296",
	); err != nil {
		return err
	}
	if err := cp.poll(ctx, "etcd healthy", func() error { return httpOK(nil, etcdURL+"/health") }); err != nil {
		return err
	}

	if err := cp.spawn("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(o.dir, "pki"),
		"--tls-cert-file="+p.ServingCert, "--tls-private-key-file="+p.ServingKey,
		"--client-ca-file="+p.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.SAPub,
		"--service-account-signing-key-file="+p.SAKey,
		"--service-cluster-ip-range=10.0.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// The kubelet API (pods/log) is kwok's server. Every fake node's Hostname
		// is its name, which resolves nowhere: reach nodes at their InternalIP (127.0.0.1),
		// verify kwok's certificate and present a client certificate, as a real cluster does.
		"--kubelet-preferred-address-types=InternalIP,InternalDNS,Hostname,ExternalIP,ExternalDNS",
		"--kubelet-certificate-authority="+p.CACert,
		"--kubelet-client-certificate="+p.KubeletClientCert,
		"--kubelet-client-key="+p.KubeletClientKey,
		fmt.Sprintf("--profiling=%t", o.profiling),
		"--max-requests-inflight=800", "--max-mutating-requests-inflight=400",
		"--v=1",
	); err != nil {
		return err
	}
	tlsClient, err := adminHTTPClient(p)
	if err != nil {
		return err
	}
	cp.server, cp.tlsClient = server, tlsClient
	if err := cp.poll(ctx, "kube-apiserver /readyz", func() error { return httpOK(tlsClient, server+"/readyz") }); err != nil {
		return err
	}

	// kwok watches its Logs and ClusterLogs resources from the start: serve them first.
	crdClient, err := apiextensionsClient(o.kubeconfig)
	if err != nil {
		return err
	}
	if err := cp.poll(ctx, "kwok CRDs Established", func() error { return ensureKwokCRDs(ctx, crdClient) }); err != nil {
		return err
	}

	if err := cp.spawn("kube-controller-manager",
		"--kubeconfig="+o.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*",
		"--service-account-private-key-file="+p.SAKey,
		"--root-ca-file="+p.CACert,
		"--cluster-signing-cert-file="+p.CACert,
		"--cluster-signing-key-file="+p.CAKey,
		"--kube-api-qps=500", "--kube-api-burst=1000",
		"--concurrent-namespace-syncs=20",
		"--v=1",
	); err != nil {
		return err
	}
	if err := cp.spawn("kube-scheduler",
		"--kubeconfig="+o.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=500", "--kube-api-burst=1000",
		"--v=1",
	); err != nil {
		return err
	}
	if err := cp.spawn("kwok",
		"--kubeconfig="+o.kubeconfig,
		"--config="+stagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=127.0.0.1",
		"--cidr=10.244.0.0/16",
		// Without a KwokConfiguration the lease is off by default; the node would then miss its
		// heartbeats and be marked NotReady (and its pods with it) every ~50 s.
		"--node-lease-duration-seconds=40",
		// One server plays the kubelet API of every node kwok manages: --node-port is what
		// kwok's node stage writes into each node's status.daemonEndpoints.kubeletEndpoint.
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort),
		fmt.Sprintf("--node-port=%d", kwokPort),
		"--tls-cert-file="+p.KubeletCert, "--tls-private-key-file="+p.KubeletKey,
		// What a container logs is the file named by a Logs or ClusterLogs object in the
		// cluster (tests/kwok-stages/README.md).
		"--enable-crds="+strings.Join(kwokCRDKinds, ","),
	); err != nil {
		return err
	}

	cs, err := clientset(o.kubeconfig)
	if err != nil {
		return err
	}
	if err := cp.poll(ctx, "fake nodes created", func() error { return ensureNodes(ctx, cs, o.nodes) }); err != nil {
		return err
	}
	go runProvisioner(runCtx, cs, filepath.Join(o.dir, "volumes"))
	if err := cp.poll(ctx, "cluster usable", func() error { return clusterUsable(ctx, cs, o.nodes) }); err != nil {
		return err
	}
	kubeletClient, err := kubeletHTTPClient(p)
	if err != nil {
		return err
	}
	if err := cp.poll(ctx, "kubelet API reachable", func() error { return kubeletsReachable(ctx, cs, kubeletClient, o.nodes) }); err != nil {
		return err
	}
	logf("control plane ready after %s; fake nodes: %d", time.Since(started).Round(time.Millisecond), o.nodes)
	if o.real != "" {
		realStart := time.Now()
		if err := cp.startReal(ctx, cs, server); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
		if err := cp.writeRealEnv(); err != nil {
			return err
		}
		logf("real node ready after %s; preview hosts on http://%s and https://%s", time.Since(realStart).Round(time.Millisecond), cp.node.webAddr, cp.node.httpsAddr)
	}
	if o.smoke && o.real != "" {
		smokeStart := time.Now()
		if err := realSmoke(ctx, cs, cp.node); err != nil {
			return fmt.Errorf("real smoke test: %w", err)
		}
		logf("real smoke test passed in %s", time.Since(smokeStart).Round(time.Millisecond))
	} else if o.smoke {
		smokeStart := time.Now()
		kwok, err := kwokClient(o.kubeconfig)
		if err != nil {
			return err
		}
		if err := smoke(ctx, cs, kwok, o.dir); err != nil {
			return fmt.Errorf("smoke test: %w", err)
		}
		logf("smoke test passed in %s", time.Since(smokeStart).Round(time.Millisecond))
	}
	if o.readyFile != "" {
		if err := os.WriteFile(o.readyFile, []byte(o.kubeconfig+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// poll calls check until it succeeds, a child exits, or ctx ends.
func (cp *controlPlane) poll(ctx context.Context, what string, check func() error) error {
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		select {
		case c := <-cp.exited:
			if !c.restarting {
				return fmt.Errorf("waiting for %s: %s exited: %v", what, c.name, c.err)
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wait blocks until a stop signal arrives or a child exits on its own; SIGUSR1 meanwhile
// restarts kube-apiserver (or starts it, when SIGUSR2 stopped it), SIGUSR2 stops it.
func (cp *controlPlane) wait(ctx context.Context) error {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	for {
		select {
		case <-ctx.Done():
			logf("stopping")
			return nil
		case c := <-cp.exited:
			if c.restarting {
				continue
			}
			return fmt.Errorf("%s exited unexpectedly: %v", c.name, c.err)
		case <-usr1:
			if err := cp.restart(ctx, "kube-apiserver"); err != nil {
				return err
			}
		case <-usr2:
			if err := cp.stopFor(ctx, "kube-apiserver"); err != nil {
				return err
			}
		}
	}
}

// restart stops child name (SIGTERM, SIGKILL after 10 s) unless it is stopped already, starts it
// again with the same flags, waits until the API is ready again and records the count in
// <dir>/apiserver-restarts.
func (cp *controlPlane) restart(ctx context.Context, name string) error {
	old, err := cp.named(name)
	if err != nil {
		return err
	}
	started := time.Now()
	if !cp.isDown(old) {
		cp.kill(old)
		logf("stopped %s for a restart", name)
	}
	if err := cp.spawn(name, old.args...); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cp.poll(readyCtx, name+" /readyz after a restart", func() error { return httpOK(cp.tlsClient, cp.server+"/readyz") }); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(cp.opts.dir, "apiserver-down"))
	cp.restarts++
	logf("restarted %s in %s (restart %d)", name, time.Since(started).Round(time.Millisecond), cp.restarts)
	count := filepath.Join(cp.opts.dir, "apiserver-restarts")
	return os.WriteFile(count, []byte(fmt.Sprintf("%d\n", cp.restarts)), 0o600)
}

// stopFor stops child name and leaves it stopped until the next restart, writing
// <dir>/apiserver-down once it is down.
func (cp *controlPlane) stopFor(_ context.Context, name string) error {
	c, err := cp.named(name)
	if err != nil {
		return err
	}
	if !cp.isDown(c) {
		cp.kill(c)
	}
	logf("stopped %s until it is started again", name)
	return os.WriteFile(filepath.Join(cp.opts.dir, "apiserver-down"), []byte("down\n"), 0o600)
}

func (cp *controlPlane) named(name string) (*child, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, c := range cp.children {
		if c.name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s: no such component", name)
}

// isDown tells whether a child stopped on purpose has exited.
func (cp *controlPlane) isDown(c *child) bool {
	select {
	case <-c.done:
		return c.restarting
	default:
		return false
	}
}

// kill stops child c on purpose (SIGTERM, SIGKILL after 10 s) and waits until it has exited.
func (cp *controlPlane) kill(c *child) {
	c.restarting = true
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// shutdown stops children in reverse start order: SIGTERM, then SIGKILL after a grace period.
func (cp *controlPlane) shutdown() {
	cp.mu.Lock()
	children := append([]*child(nil), cp.children...)
	cp.mu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		c := children[i]
		select {
		case <-c.done:
			continue
		default:
		}
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			logf("%s did not stop within 10s; killing it", c.name)
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	cp.stopReal()
}

func (cp *controlPlane) dumpLogs() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, c := range cp.children {
		data, err := os.ReadFile(c.logPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "----- last lines of %s -----\n%s\n", c.logPath, strings.Join(lines, "\n"))
	}
}

func httpOK(client *http.Client, url string) error {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

func adminHTTPClient(p *pki) (*http.Client, error) {
	cert, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

// kubeletHTTPClient talks to the kubelet API as the apiserver does: it trusts the cluster CA and
// presents the apiserver's kubelet client certificate.
func kubeletHTTPClient(p *pki) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.KubeletClientCert, p.KubeletClientKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

func writeKubeconfig(path, server string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube-harness"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCertPEM, ClientKeyData: p.adminKeyPEM}
	cfg.Contexts["kube-harness"] = &clientcmdapi.Context{Cluster: "kube-harness", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kube-harness"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 200, 400
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

func kwokClient(kubeconfig string) (*kwokclient.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return kwokclient.NewForConfig(rc)
}

func apiextensionsClient(kubeconfig string) (*apiextensions.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return apiextensions.NewForConfig(rc)
}
