package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The apiserver reaches every fake node's kubelet API (kwok) at 127.0.0.1 and verifies it
// against the cluster CA; kwok's certificate must be valid for that address, and the
// apiserver's client certificate for client auth.
func TestKubeletCertificates(t *testing.T) {
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.caPEM)
	load := func(path string) *x509.Certificate {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: no PEM block", path)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	serving := load(p.KubeletCert)
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("kubelet serving certificate: %v", err)
	}
	if err := serving.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("kubelet serving certificate for the nodes' InternalIP: %v", err)
	}
	if !serving.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("kubelet serving certificate IPs %v", serving.IPAddresses)
	}
	client := load(p.KubeletClientCert)
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("apiserver kubelet client certificate: %v", err)
	}
	for _, key := range []string{p.KubeletKey, p.KubeletClientKey} {
		data, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		if block, _ := pem.Decode(data); block == nil || block.Type != "PRIVATE KEY" {
			t.Errorf("%s is not a PKCS#8 private key", key)
		}
	}
}

// The gate asks each node's kubelet API where the apiserver would: at its InternalIP and the
// port kwok wrote into its status, over TLS checked against the cluster CA, with the
// apiserver's client certificate; a node whose kubelet API is elsewhere keeps it waiting.
func TestKubeletsReachableAsTheAPIServerReachesThem(t *testing.T) {
	ctx := context.Background()
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.LoadX509KeyPair(p.KubeletCert, p.KubeletKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(p.caPEM)
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	kubelet.TLS = &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: clientCAs,
	}
	kubelet.StartTLS()
	defer kubelet.Close()
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port

	client, err := kubeletHTTPClient(p)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	if err := ensureNodes(ctx, cs, 2); err != nil {
		t.Fatal(err)
	}
	setPort := func(i int, port int) {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kubeletsReachable(ctx, cs, client, 2); err == nil || !strings.Contains(err.Error(), "kwok-node-0") {
		t.Errorf("no kubelet ports yet: %v, want waiting for kwok-node-0", err)
	}
	setPort(0, port)
	if err := kubeletsReachable(ctx, cs, client, 2); err == nil || !strings.Contains(err.Error(), "kwok-node-1") {
		t.Errorf("kwok-node-1 without a port: %v, want waiting for kwok-node-1", err)
	}
	// A port nothing serves.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	setPort(1, closedPort)
	if err := kubeletsReachable(ctx, cs, client, 2); err == nil || !strings.Contains(err.Error(), "kwok-node-1") {
		t.Errorf("kwok-node-1 on a closed port: %v, want waiting for kwok-node-1", err)
	}
	setPort(1, port)
	if err := kubeletsReachable(ctx, cs, client, 2); err != nil {
		t.Errorf("both kubelets served: %v", err)
	}
	// The fake nodes' InternalIP is where the apiserver goes.
	node, _ := cs.CoreV1().Nodes().Get(ctx, nodeName(0), metav1.GetOptions{})
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "127.0.0.1" {
			t.Errorf("InternalIP %s, want 127.0.0.1", a.Address)
		}
	}
}
