// realsmokefront.go proves, within the real tier's smoke check, what a preview's front door
// needs from Traefik: a forwardAuth Middleware (traefik.io, the kubernetesCRD provider) in the
// preview's namespace, used from an Ingress by annotation and from an HTTPRoute by an
// ExtensionRef filter, and TLS on the websecure entry point with a certificate from a Secret,
// named by an Ingress's spec.tls and by a Gateway's HTTPS listener. The auth server is served
// by `up` itself on the host's loopback, where Traefik runs.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

const (
	smokeAuthHost    = "smoke-auth.preview.localhost" // an Ingress with the Middleware
	smokeGatewayHost = "smoke-gw.preview.localhost"   // an HTTPRoute with the Middleware
	smokeTLSHost     = "smoke-tls.preview.localhost"  // an Ingress with spec.tls
	smokeCertName    = "*.preview.localhost"
	smokeMiddleware  = "smoke-auth"
	smokeTLSSecret   = "smoke-tls"
	// smokeAuthBody is the auth server's answer without the header; Traefik passes it on.
	smokeAuthBody = "smoke auth: no X-Smoke: yes\n"
)

var (
	middlewareGVR = schema.GroupVersionResource{Group: "traefik.io", Version: "v1alpha1", Resource: "middlewares"}
	gatewayGVR    = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	httpRouteGVR  = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
)

// smokeAuthHandler is the forwardAuth server: 401 (with a WWW-Authenticate header and a body)
// without `X-Smoke: yes`, 200 with it. X-Smoke-Saw tells, on every answer, the method it was
// asked with and the X-Forwarded-Method, -Proto, -Host and -Uri Traefik sent.
func smokeAuthHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Smoke-Saw", strings.Join([]string{r.Method, r.Header.Get("X-Forwarded-Method"),
		r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Uri")}, " "))
	if r.Header.Get("X-Smoke") != "yes" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="smoke"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, smokeAuthBody)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// startSmokeAuth serves smokeAuthHandler on a free loopback port until stop.
func startSmokeAuth() (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(smokeAuthHandler), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String(), func() { _ = srv.Close() }, nil
}

// smokeCert makes a throwaway CA and a leaf for *.preview.localhost signed by it: the CA's pool
// (for the client) and the leaf's PEM certificate and key (for the Secret).
func smokeCert() (*x509.CertPool, []byte, []byte, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandcastle real-tier smoke CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: smokeCertName},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		DNSNames:    []string{smokeCertName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// createSmokeFrontDoor creates, in ns, the forwardAuth Middleware, an Ingress using it, the TLS
// Secret and an Ingress naming it, and a Gateway (HTTP on web's port, HTTPS on websecure's) with
// an HTTPRoute using the Middleware: all before the app is ready, so that Traefik has them by
// the time the checks run.
func createSmokeFrontDoor(ctx context.Context, cs *kubernetes.Clientset, dyn dynamic.Interface, n *realNode, ns, authAddr string, certPEM, keyPEM []byte) error {
	if _, err := dyn.Resource(middlewareGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware",
		"metadata": map[string]any{"name": smokeMiddleware},
		"spec": map[string]any{"forwardAuth": map[string]any{
			"address": "http://" + authAddr + "/",
			// Both set, or Traefik warns each time it builds the middleware.
			"trustForwardHeader":  false,
			"maxResponseBodySize": int64(4096),
		}},
	}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("middleware: %w", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: smokeTLSSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	authIngress := appIngress("app-auth", smokeAuthHost)
	authIngress.Annotations = map[string]string{
		"traefik.ingress.kubernetes.io/router.middlewares": ns + "-" + smokeMiddleware + "@kubernetescrd",
	}
	tlsIngress := appIngress("app-tls", smokeTLSHost)
	tlsIngress.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{smokeTLSHost}, SecretName: smokeTLSSecret}}
	for _, ing := range []*networkingv1.Ingress{authIngress, tlsIngress} {
		if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	port := func(addr string) int64 {
		_, p, _ := net.SplitHostPort(addr)
		v, _ := strconv.ParseInt(p, 10, 32)
		return v
	}
	allRoutes := map[string]any{"namespaces": map[string]any{"from": "All"}}
	if _, err := dyn.Resource(gatewayGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "smoke"},
		"spec": map[string]any{
			"gatewayClassName": "traefik",
			"listeners": []any{
				map[string]any{"name": "web", "protocol": "HTTP", "port": port(n.webAddr), "allowedRoutes": allRoutes},
				map[string]any{"name": "websecure", "protocol": "HTTPS", "port": port(n.httpsAddr), "allowedRoutes": allRoutes,
					"tls": map[string]any{"mode": "Terminate", "certificateRefs": []any{
						map[string]any{"group": "", "kind": "Secret", "name": smokeTLSSecret},
					}}},
			},
		},
	}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if _, err := dyn.Resource(httpRouteGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "app"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "smoke"}},
			"hostnames":  []any{smokeGatewayHost},
			"rules": []any{map[string]any{
				"filters": []any{map[string]any{"type": "ExtensionRef", "extensionRef": map[string]any{
					"group": "traefik.io", "kind": "Middleware", "name": smokeMiddleware,
				}}},
				"backendRefs": []any{map[string]any{"name": "app", "port": int64(80)}},
			}},
		},
	}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("httproute: %w", err)
	}
	return nil
}

// appIngress routes host to the app's Service.
func appIngress(name, host string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80},
				}},
			}}}},
		}}},
	}
}

// frontDoorClient sends every request to Traefik's entry point at addr whatever the URL's
// host (which, for https URLs, is also the SNI and the name the certificate must hold), and
// trusts only pool.
func frontDoorClient(addr string, pool *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		},
	}
}

// checkAuthGate wants url (through client) to answer the auth server's 401, its headers and
// body, without X-Smoke, and the app at commit c1 with it.
func checkAuthGate(ctx context.Context, client *http.Client, url, proto, host string) error {
	get := func(smoke bool) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, "", err
		}
		if smoke {
			req.Header.Set("X-Smoke", "yes")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp, string(body), nil
	}
	resp, body, err := get(false)
	if err != nil {
		return err
	}
	wantSaw := "GET GET " + proto + " " + host + " /healthz"
	if resp.StatusCode != http.StatusUnauthorized || body != smokeAuthBody || resp.Header.Get("WWW-Authenticate") == "" ||
		resp.Header.Get("X-Smoke-Saw") != wantSaw {
		return fmt.Errorf("without X-Smoke: HTTP %d, X-Smoke-Saw %q (want %q), body %q", resp.StatusCode,
			resp.Header.Get("X-Smoke-Saw"), wantSaw, body)
	}
	resp, body, err = get(true)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Commit") != "c1" {
		return fmt.Errorf("with X-Smoke: HTTP %d, X-Commit %q, body %q", resp.StatusCode, resp.Header.Get("X-Commit"), body)
	}
	return nil
}

// checkTLS wants https://smokeTLSHost/healthz on websecure to be the app, served with the
// smoke's certificate (verified against its CA for that name), and the same host on web to be
// the app over plain HTTP as well.
func checkTLS(ctx context.Context, tlsClient, webClient *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+smokeTLSHost+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := tlsClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Commit") != "c1" {
		return fmt.Errorf("https: HTTP %d, X-Commit %q", resp.StatusCode, resp.Header.Get("X-Commit"))
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || !slices.Contains(resp.TLS.PeerCertificates[0].DNSNames, smokeCertName) {
		return errors.New("https: not the smoke's certificate")
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+smokeTLSHost+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err = webClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the same host on web: HTTP %d", resp.StatusCode)
	}
	return nil
}

// smokeFrontDoor runs the checks, each polled until Traefik has loaded what it needs.
func smokeFrontDoor(ctx context.Context, n *realNode, pool *x509.CertPool) error {
	web := frontDoorClient(n.webAddr, pool)
	secure := frontDoorClient(n.httpsAddr, pool)
	defer web.CloseIdleConnections()
	defer secure.CloseIdleConnections()
	checks := []struct {
		what  string
		check func() error
	}{
		{"Ingress with the forwardAuth Middleware (web)", func() error {
			return checkAuthGate(ctx, web, "http://"+smokeAuthHost+"/healthz", "http", smokeAuthHost)
		}},
		{"HTTPRoute with the Middleware as an ExtensionRef filter (Gateway, web)", func() error {
			return checkAuthGate(ctx, web, "http://"+smokeGatewayHost+"/healthz", "http", smokeGatewayHost)
		}},
		{"the same HTTPRoute on the Gateway's HTTPS listener (websecure)", func() error {
			return checkAuthGate(ctx, secure, "https://"+smokeGatewayHost+"/healthz", "https", smokeGatewayHost)
		}},
		{"Ingress with spec.tls (websecure, and web)", func() error { return checkTLS(ctx, secure, web) }},
	}
	for _, c := range checks {
		if err := waitFor(ctx, c.what, 30*time.Second, func() (bool, error) {
			err := c.check()
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	return nil
}
