// cluster.go holds what `up` does through the API once the processes run: the fake nodes, the
// readiness gate, and the smoke test that proves the whole chain (scheduler, kwok, controllers).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	kwokv1alpha1 "sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	kwokclient "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
)

// fakeNodeTemplate is the one definition of the fake nodes' shape, shared with the Rust tests
// (tests/it/support/fixtures.rs), which add nodes of their own: ${NAME} stands for the node's
// name, ${ZONE} for its zone. It is a typical worker's: capacity including ephemeral storage,
// the well-known labels (hostname, os, arch, instance type, zone, region, worker role), node
// info and addresses, so that real apps' pods schedule on it.
//
//go:embed fake-node.json
var fakeNodeTemplate string

// zones are the fake nodes' zones (in region local-1), taken in turn: node i is in zones[i%3].
// tests/it/support/fixtures.rs follows the same rule.
var zones = []string{"local-1a", "local-1b", "local-1c"}

// nodeName is the name of the i-th fake node.
func nodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// fakeNode is the i-th fake node as `up` creates it.
func fakeNode(i int) (*corev1.Node, error) {
	text := strings.NewReplacer("${NAME}", nodeName(i), "${ZONE}", zones[i%len(zones)]).Replace(fakeNodeTemplate)
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var node corev1.Node
	if err := dec.Decode(&node); err != nil {
		return nil, fmt.Errorf("fake-node.json: %w", err)
	}
	return &node, nil
}

// ensureNodes creates the fake nodes kwok-node-0..n-1 (those that exist already are kept).
func ensureNodes(ctx context.Context, cs kubernetes.Interface, n int) error {
	for i := range n {
		node, err := fakeNode(i)
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// clusterUsable is the readiness gate: every one of the n fake nodes Ready without the not-ready
// or unreachable taint and with the port of its kubelet API, and the controllers have created the
// default ServiceAccount and the root CA ConfigMap.
func clusterUsable(ctx context.Context, cs kubernetes.Interface, n int) error {
	for i := range n {
		if err := nodeUsable(ctx, cs, nodeName(i)); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("serviceaccount default/default: %w", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("configmap default/kube-root-ca.crt: %w", err)
	}
	return nil
}

func nodeUsable(ctx context.Context, cs kubernetes.Interface, name string) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return fmt.Errorf("node %s not Ready yet", name)
	}
	for _, t := range node.Spec.Taints {
		if t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable" {
			return fmt.Errorf("node %s still tainted %s", name, t.Key)
		}
	}
	// kwok's node stage writes its --node-port here; the apiserver reaches the node's kubelet API
	// (pods/log) on this port at the node's InternalIP.
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port <= 0 {
		return fmt.Errorf("node %s has no kubelet port yet", name)
	}
	return nil
}

// kubeletsReachable checks that each of the n fake nodes' kubelet API (kwok's server) answers
// where and as the apiserver reaches it for pods/log: at the node's InternalIP and kubelet port,
// with a certificate the cluster CA vouches for, to a client presenting the apiserver's kubelet
// client certificate. (The apiserver's own nodes/proxy refuses loopback addresses, so the gate
// asks directly.)
func kubeletsReachable(ctx context.Context, cs kubernetes.Interface, client *http.Client, n int) error {
	for i := range n {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ip := ""
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
				break
			}
		}
		port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
		if ip == "" || port <= 0 {
			return fmt.Errorf("node %s: no InternalIP or kubelet port yet", node.Name)
		}
		url := "https://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + "/healthz"
		if err := httpOK(client, url); err != nil {
			return fmt.Errorf("kubelet API of %s: %w", node.Name, err)
		}
	}
	return nil
}

func waitFor(ctx context.Context, what string, timeout time.Duration, check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := check()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// smoke runs a Deployment to Available and a Job to Complete in a scratch namespace, reads the
// Deployment's pod's logs as a ClusterLogs object says, then deletes the namespace and waits
// until it is gone.
func smoke(ctx context.Context, cs *kubernetes.Clientset, kwok kwokclient.Interface, dir string) error {
	ns := fmt.Sprintf("harness-smoke-%d", time.Now().UnixNano()%1_000_000)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": "smoke"}
	container := corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{container},
			}},
		},
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, "deployment smoke Available", time.Minute, func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("available replicas %d", d.Status.AvailableReplicas)
	}); err != nil {
		return err
	}
	if err := smokeLogs(ctx, cs, kwok, ns, dir); err != nil {
		return err
	}
	if err := waitFor(ctx, "job smoke Complete", time.Minute, func() (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("succeeded %d", j.Status.Succeeded)
	}); err != nil {
		return err
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return waitFor(ctx, "namespace "+ns+" gone", 2*time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// smokeLogs points kwok at a log file for the pods of ns and reads it back through the
// apiserver's pods/log, the way `kubectl logs` does.
func smokeLogs(ctx context.Context, cs *kubernetes.Clientset, kwok kwokclient.Interface, ns, dir string) error {
	const line = "kube-harness smoke: logs are served"
	logFile := filepath.Join(dir, ns+".log")
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	if err := os.WriteFile(logFile, []byte(stamp+" stdout F "+line+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(logFile)
	cl := &kwokv1alpha1.ClusterLogs{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kwokv1alpha1.ClusterLogsSpec{
			Selector: &kwokv1alpha1.ObjectSelector{MatchNamespaces: []string{ns}},
			Logs:     []kwokv1alpha1.Log{{LogsFile: &logFile}},
		},
	}
	if _, err := kwok.KwokV1alpha1().ClusterLogs().Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("ClusterLogs %s: %w", ns, err)
	}
	defer func() { _ = kwok.KwokV1alpha1().ClusterLogs().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	return waitFor(ctx, "pod logs of deployment smoke", time.Minute, func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Errorf("pods of deployment smoke: %d, %v", len(pods.Items), err)
		}
		out, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		if got := strings.TrimSpace(string(out)); got != line {
			return false, fmt.Errorf("logs %q, want %q", got, line)
		}
		return true, nil
	})
}
