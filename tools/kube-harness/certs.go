// certs.go generates the control plane's PKI: a CA, the apiserver serving certificate, an admin
// client certificate in system:masters, the kubelet pair (kwok's serving certificate for the
// kubelet API, and the apiserver's client certificate for it), and a separate service-account
// signing key. Keys are written as PKCS#8 so that both rustls and OpenSSL read them.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of every file generated for one control plane.
type pki struct {
	CACert, CAKey           string
	ServingCert, ServingKey string
	AdminCert, AdminKey     string
	SAKey, SAPub            string
	// KubeletCert is what kwok serves the kubelet API of every fake node with (on 127.0.0.1);
	// KubeletClientCert is what the apiserver presents to it (pods/log).
	KubeletCert, KubeletKey             string
	KubeletClientCert, KubeletClientKey string

	caPEM, adminCertPEM, adminKeyPEM []byte
	// The CA itself, to issue more certificates later (the real tier's node identities).
	caCert     *x509.Certificate
	caKey      crypto.Signer
	validFrom  time.Time
	validUntil time.Time
}

func writePEM(path, typ string, der []byte) ([]byte, error) {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	return data, os.WriteFile(path, data, 0o600)
}

func writeKey(path string, key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// generatePKI writes all certificates and keys into dir.
func generatePKI(dir string) (*pki, error) {
	p := &pki{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
		KubeletCert: filepath.Join(dir, "kubelet.crt"), KubeletKey: filepath.Join(dir, "kubelet.key"),
		KubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	now := time.Now().Add(-time.Hour)
	notAfter := now.Add(10 * 365 * 24 * time.Hour)

	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kube-harness-ca"},
		NotBefore:             now,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if p.caPEM, err = writePEM(p.CACert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	if _, err = writeKey(p.CAKey, caKey); err != nil {
		return nil, err
	}

	p.caCert, p.caKey, p.validFrom, p.validUntil = caCert, caKey, now, notAfter
	issue := p.issue
	if _, _, err := issue(p.ServingCert, p.ServingKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}); err != nil {
		return nil, err
	}
	if p.adminCertPEM, p.adminKeyPEM, err = issue(p.AdminCert, p.AdminKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-harness-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}

	// The apiserver reaches a node's kubelet at the node's InternalIP (127.0.0.1 for every fake
	// node) and checks the certificate against the CA, as a real control plane does.
	if _, _, err := issue(p.KubeletCert, p.KubeletKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kwok-kubelet"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}); err != nil {
		return nil, err
	}
	if _, _, err := issue(p.KubeletClientCert, p.KubeletClientKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if _, err := writeKey(p.SAKey, saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	if _, err := writePEM(p.SAPub, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs a certificate for tmpl with the CA and writes it and its new key (PKCS#8).
func (p *pki) issue(certPath, keyPath string, tmpl *x509.Certificate) ([]byte, []byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = p.validFrom
	tmpl.NotAfter = p.validUntil
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	certPEM, err := writePEM(certPath, "CERTIFICATE", der)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := writeKey(keyPath, key)
	return certPEM, keyPEM, err
}
