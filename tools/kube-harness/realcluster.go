// realcluster.go writes what the real tier needs in the cluster (RBAC for CoreDNS and Traefik,
// kube-dns, the kubernetes Service's endpoints, the traefik IngressClass and GatewayClass, the
// Gateway API CRDs, Traefik's own (traefik.io) and the VolumeSnapshot ones, the fake nodes'
// taint), and checks that the tier is ready.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

const harnessManager = "sandcastle-harness"

func writeIdentityKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	// The apiserver's certificate names kubernetes.default.svc, not the proxy's address.
	cfg.Clusters["kube-harness"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM, TLSServerName: "kubernetes.default.svc"}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["kube-harness"] = &clientcmdapi.Context{Cluster: "kube-harness", AuthInfo: "node"}
	cfg.CurrentContext = "kube-harness"
	return clientcmd.WriteToFile(*cfg, path)
}

func create[T any](ctx context.Context, what string, f func(context.Context, T, metav1.CreateOptions) (T, error), obj T) error {
	if _, err := f(ctx, obj, metav1.CreateOptions{FieldManager: harnessManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

var read = []string{"get", "list", "watch"}

// traefikResources are the traefik.io kinds Traefik's kubernetesCRD provider lists and watches
// (v3.6.17, pkg/provider/kubernetes/crd/client.go WatchAll): one informer each, in every
// namespace. It writes none of them, nor their status.
var traefikResources = []string{
	"ingressroutes", "ingressroutetcps", "ingressrouteudps", "middlewares", "middlewaretcps",
	"serverstransports", "serverstransporttcps", "tlsoptions", "tlsstores", "traefikservices",
}

// roles are what CoreDNS (the kubernetes plugin) and Traefik (the kubernetesIngress,
// kubernetesGateway and kubernetesCRD providers) may do, bound to the users of their
// certificates. Besides its own kinds, the CRD provider watches Services, EndpointSlices,
// ConfigMaps and Secrets in every namespace and Nodes, all already read by the others.
func roles() map[string][]rbacv1.PolicyRule {
	return map[string][]rbacv1.PolicyRule{
		"coredns": {
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		},
		"traefik": {
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "secrets", "namespaces", "nodes", "configmaps"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: read},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*/status"}, Verbs: []string{"update", "patch"}},
			{APIGroups: []string{"traefik.io"}, Resources: traefikResources, Verbs: read},
		},
	}
}

func setupRealCluster(ctx context.Context, cs *kubernetes.Clientset, kubeconfig string, n *realNode, realDir string, fakeNodes int) error {
	for who, rules := range roles() {
		name := harnessManager + ":" + who
		if err := create(ctx, "clusterrole "+name, cs.RbacV1().ClusterRoles().Create, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules,
		}); err != nil {
			return err
		}
		if err := create(ctx, "clusterrolebinding "+name, cs.RbacV1().ClusterRoleBindings().Create, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}},
		}); err != nil {
			return err
		}
	}
	if err := dnsService(ctx, cs); err != nil {
		return err
	}
	if err := apiEndpoints(ctx, cs, n.proxy.addr); err != nil {
		return err
	}
	if err := create(ctx, "ingressclass traefik", cs.NetworkingV1().IngressClasses().Create, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "traefik", Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "traefik.io/ingress-controller"},
	}); err != nil {
		return err
	}
	crds := map[string]string{
		"Gateway API": filepath.Join(realDir, "gateway-crds"),
		"Traefik":     filepath.Join(realDir, "traefik-crds"),
	}
	if n.csi {
		// With the others: one wait until all are Established (realcsi.go).
		crds["VolumeSnapshot"] = filepath.Join(realDir, "snapshot-crds")
	}
	if err := installCRDs(ctx, kubeconfig, crds); err != nil {
		return err
	}
	if err := gatewayClass(ctx, kubeconfig); err != nil {
		return err
	}
	return taintFakeNodes(ctx, cs, fakeNodes)
}

// dnsService is kube-system/kube-dns at the clusterDNS address, its endpoint CoreDNS on the node.
func dnsService(ctx context.Context, cs *kubernetes.Clientset) error {
	ports := []corev1.ServicePort{
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
	}
	if err := create(ctx, "service kube-dns", cs.CoreV1().Services("kube-system").Create, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec:       corev1.ServiceSpec{ClusterIP: dnsServiceIP, Ports: ports},
	}); err != nil {
		return err
	}
	return create(ctx, "endpointslice kube-dns", cs.DiscoveryV1().EndpointSlices("kube-system").Create,
		endpointSlice("kube-dns", nodeIP, []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		}))
}

// apiEndpoints points default/kubernetes (10.0.0.1:443) at the apiserver proxy, so that pods
// reach the API.
func apiEndpoints(ctx context.Context, cs *kubernetes.Clientset, proxyAddr string) error {
	host, portText, err := net.SplitHostPort(proxyAddr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	return create(ctx, "endpointslice kubernetes", cs.DiscoveryV1().EndpointSlices("default").Create,
		endpointSlice("kubernetes", host, []discoveryv1.EndpointPort{
			{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)},
		}))
}

func endpointSlice(service, ip string, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-harness", Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: harnessManager,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       ports,
	}
}

// crdFiles reads the CustomResourceDefinitions of every *.yaml and *.yml file in dir; a file may
// hold several, as YAML documents.
func crdFiles(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Name == "" {
				continue // an empty document
			}
			if crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: a %s, not a CustomResourceDefinition", f, crd.Kind)
			}
			crds = append(crds, &crd)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in %s (scripts/kube-harness build --real puts them there)", dir)
	}
	return crds, nil
}

// installCRDs creates the CRDs of each named folder and waits until all are Established:
// Traefik's providers start watching their kinds as it starts.
func installCRDs(ctx context.Context, kubeconfig string, dirs map[string]string) error {
	crdClient, err := apiextensionsClient(kubeconfig)
	if err != nil {
		return err
	}
	var names []string
	for what, dir := range dirs {
		crds, err := crdFiles(dir)
		if err != nil {
			return fmt.Errorf("%s CRDs: %w", what, err)
		}
		for _, crd := range crds {
			if err := create(ctx, "crd "+crd.Name, crdClient.ApiextensionsV1().CustomResourceDefinitions().Create, crd); err != nil {
				return err
			}
			names = append(names, crd.Name)
		}
	}
	return waitFor(ctx, "CRDs Established", time.Minute, func() (bool, error) {
		for _, name := range names {
			crd, err := crdClient.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !crdEstablished(crd) {
				return false, fmt.Errorf("crd %s not Established yet (%v)", name, err)
			}
		}
		return true, nil
	})
}

// gatewayClass creates the traefik GatewayClass (its CRD Established).
func gatewayClass(ctx context.Context, kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": "traefik"},
		"spec":     map[string]any{"controllerName": "traefik.io/gateway-controller"},
	}}
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	return waitFor(ctx, "GatewayClass traefik", time.Minute, func() (bool, error) {
		_, err := dyn.Resource(gvr).Create(ctx, gc, metav1.CreateOptions{FieldManager: harnessManager})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
}

// taintFakeNodes keeps workloads off the fake nodes: beside a real node, a pod lands on a fake
// node only if it tolerates sandcastle.dev/fake-node.
func taintFakeNodes(ctx context.Context, cs *kubernetes.Clientset, n int) error {
	for i := range n {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: fakeNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: harnessManager}); err != nil {
			return err
		}
	}
	return nil
}

// realReady: the node Ready without its not-ready taint, kube-dns answering from the host through
// the Service address, and Traefik serving on both preview entry points.
func realReady(ctx context.Context, cs kubernetes.Interface, n *realNode) error {
	if err := nodeUsable(ctx, cs, realNodeName); err != nil {
		return err
	}
	if err := dnsAnswers(ctx, "kubernetes.default.svc.cluster.local", "10.0.0.1"); err != nil {
		return err
	}
	if err := httpOK(nil, "http://"+n.pingAddr+"/ping"); err != nil {
		return fmt.Errorf("traefik: %w", err)
	}
	resp, err := http.Get("http://" + n.webAddr + "/")
	if err != nil {
		return fmt.Errorf("traefik web entry point: %w", err)
	}
	resp.Body.Close()
	// Before any certificate is loaded websecure answers with Traefik's own: only the
	// handshake and an answer are wanted here.
	tlsClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // #nosec G402 -- readiness only, no data
	}}
	defer tlsClient.CloseIdleConnections()
	resp, err = tlsClient.Get("https://" + n.httpsAddr + "/")
	if err != nil {
		return fmt.Errorf("traefik websecure entry point: %w", err)
	}
	resp.Body.Close()
	return nil
}

// dnsAnswers asks kube-dns (at its Service address) for name and wants want among the answers.
func dnsAnswers(ctx context.Context, name, want string) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(dnsServiceIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return fmt.Errorf("kube-dns: %w", err)
	}
	for _, a := range addrs {
		if a == want {
			return nil
		}
	}
	return fmt.Errorf("kube-dns: %s is %v, want %s", name, addrs, want)
}
