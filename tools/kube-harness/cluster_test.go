package main

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
