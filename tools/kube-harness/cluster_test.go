package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A real app's pods request ephemeral storage and select nodes by the labels a worker carries;
// the fake node must have both, or such pods never schedule.
func TestFakeNodeLooksLikeAWorker(t *testing.T) {
	node, err := fakeNode(0)
	if err != nil {
		t.Fatal(err)
	}
	if node.Name != "kwok-node-0" {
		t.Errorf("name %q, want kwok-node-0", node.Name)
	}
	if got := node.Annotations["kwok.x-k8s.io/node"]; got != "fake" {
		t.Errorf("annotation kwok.x-k8s.io/node = %q, want fake (kwok manages only nodes carrying it)", got)
	}
	wantLabels := map[string]string{
		"kubernetes.io/hostname":           "kwok-node-0",
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node-role.kubernetes.io/worker":   "",
		"node.kubernetes.io/instance-type": "kwok.32xlarge",
		"topology.kubernetes.io/region":    "local-1",
		"topology.kubernetes.io/zone":      "local-1a",
	}
	for key, want := range wantLabels {
		if got, ok := node.Labels[key]; !ok || got != want {
			t.Errorf("label %s = %q (present: %v), want %q", key, got, ok, want)
		}
	}
	wantResources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	for what, list := range map[string]corev1.ResourceList{
		"capacity": node.Status.Capacity, "allocatable": node.Status.Allocatable,
	} {
		for name, want := range wantResources {
			if got, ok := list[name]; !ok || got.Cmp(want) != 0 {
				t.Errorf("%s %s = %s (present: %v), want %s", what, name, got.String(), ok, want.String())
			}
		}
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != "v1.36.3" || info.OperatingSystem != "linux" || info.Architecture != "amd64" {
		t.Errorf("nodeInfo kubelet %q, os %q, arch %q; want v1.36.3, linux, amd64",
			info.KubeletVersion, info.OperatingSystem, info.Architecture)
	}
	if info.KernelVersion == "" || info.OSImage == "" || info.ContainerRuntimeVersion == "" {
		t.Errorf("nodeInfo kernel %q, OS image %q, container runtime %q; want all set",
			info.KernelVersion, info.OSImage, info.ContainerRuntimeVersion)
	}
	addresses := map[corev1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		addresses[a.Type] = a.Address
	}
	if addresses[corev1.NodeInternalIP] != "127.0.0.1" || addresses[corev1.NodeHostName] != "kwok-node-0" {
		t.Errorf("addresses %v, want InternalIP 127.0.0.1 and Hostname kwok-node-0", node.Status.Addresses)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("taints %v, want none", node.Spec.Taints)
	}
}

// Tests that spread pods over zones need nodes in different zones: node i is in zone a, b, c in turn.
func TestFakeNodesTakeTheZonesInTurn(t *testing.T) {
	for i, zone := range []string{"local-1a", "local-1b", "local-1c", "local-1a"} {
		node, err := fakeNode(i)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("kwok-node-%d", i)
		if node.Name != name || node.Labels["kubernetes.io/hostname"] != name {
			t.Errorf("node %d: name %q, hostname label %q; want %s", i, node.Name, node.Labels["kubernetes.io/hostname"], name)
		}
		if got := node.Labels["topology.kubernetes.io/zone"]; got != zone {
			t.Errorf("node %d: zone %q, want %s", i, got, zone)
		}
		if got := node.Labels["topology.kubernetes.io/region"]; got != "local-1" {
			t.Errorf("node %d: region %q, want local-1", i, got)
		}
	}
}

// With --nodes N, `up` creates N nodes and reports ready only once every one of them is Ready
// and untainted, not when the first is.
func TestClusterUsableWaitsForEveryNode(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"}},
	)
	if err := ensureNodes(ctx, cs, 3); err != nil {
		t.Fatal(err)
	}
	if err := ensureNodes(ctx, cs, 3); err != nil {
		t.Fatalf("creating the nodes again: %v", err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes.Items))
	}
	// What kwok and the node lifecycle controller do to a node as it comes up.
	update := func(i int, ready bool, taint string, port int32) {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		node.Spec.Taints = nil
		if taint != "" {
			node.Spec.Taints = []corev1.Taint{{Key: taint, Effect: corev1.TaintEffectNoSchedule}}
		}
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		node        int
		ready       bool
		taint       string
		port        int32  // the kubelet port kwok has written into the node's status
		wantBlocked string // the node the gate still waits for; "" when the cluster is usable
	}{
		{0, true, "", 10250, "kwok-node-1"},
		{1, true, "node.kubernetes.io/not-ready", 10250, "kwok-node-1"},
		{1, true, "", 10250, "kwok-node-2"},
		{2, false, "", 10250, "kwok-node-2"},
		{2, true, "node.kubernetes.io/unreachable", 10250, "kwok-node-2"},
		// Without its kubelet port, nothing reaches a node's pods' logs.
		{2, true, "", 0, "kwok-node-2"},
		{2, true, "", 10250, ""},
	} {
		update(step.node, step.ready, step.taint, step.port)
		err := clusterUsable(ctx, cs, 3)
		switch {
		case step.wantBlocked == "" && err != nil:
			t.Errorf("after node %d ready=%v taint=%q port=%d: %v, want usable", step.node, step.ready, step.taint, step.port, err)
		case step.wantBlocked != "" && (err == nil || !strings.Contains(err.Error(), step.wantBlocked)):
			t.Errorf("after node %d ready=%v taint=%q port=%d: %v, want waiting for %s", step.node, step.ready, step.taint, step.port, err, step.wantBlocked)
		}
	}
	// A single-node harness does not wait for nodes it never made.
	if err := clusterUsable(ctx, cs, 1); err != nil {
		t.Errorf("one node: %v", err)
	}
}
