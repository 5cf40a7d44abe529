package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCSIArgvs(t *testing.T) {
	n := nodePaths{root: "/run/cp/node"}
	argvs := csiArgvs("/bin/kube-harness", "/build/bin", n, 42, "/run/cp/kubeconfig")
	driver := argvs["csi-hostpath"]
	// The driver runs inside the node (its bind mounts must be where the kubelet looks) and
	// registers with that kubelet's root.
	if want := inNode(42, "/bin/kube-harness", "csi-hostpath"); !slices.Equal(driver[:len(want)], want) {
		t.Fatalf("driver argv %v, want it to start with %v", driver, want)
	}
	joined := strings.Join(driver, " ")
	for _, want := range []string{"--endpoint " + n.csiSocket(), "--node " + realNodeName, "--kubelet-root " + n.kubeletRoot(), "--root " + n.csiRoot()} {
		if !strings.Contains(joined, want) {
			t.Errorf("driver argv %q lacks %q", joined, want)
		}
	}
	for _, name := range []string{"csi-provisioner", "csi-snapshotter"} {
		argv := argvs[name]
		if argv[0] != filepath.Join("/build/bin", name) || argv[0] == "nsenter" {
			t.Errorf("%s runs %s, want the build's binary on the host", name, argv[0])
		}
		if !slices.Contains(argv, "--csi-address="+n.csiSocket()) || !slices.Contains(argv, "--kubeconfig=/run/cp/kubeconfig") ||
			!slices.Contains(argv, "--leader-election=false") {
			t.Errorf("%s argv %v", name, argv)
		}
	}
	if c := argvs["snapshot-controller"]; !slices.Contains(c, "--kubeconfig=/run/cp/kubeconfig") || slices.ContainsFunc(c, func(a string) bool {
		return strings.HasPrefix(a, "--csi-address")
	}) {
		t.Errorf("snapshot-controller argv %v", c)
	}
	// A unix socket path longer than 107 bytes cannot be bound.
	long := nodePaths{root: "/root/.cache/sandcastle/run/cp-abcdef/node"}
	for _, p := range []string{long.csiSocket(), csiRegistrationSocket(long.kubeletRoot())} {
		if len(p) > 107 {
			t.Errorf("socket path %s is %d bytes", p, len(p))
		}
	}
}

func TestCSIClusterObjects(t *testing.T) {
	d := csiDriverObject()
	if d.Name != csiDriverName || d.Spec.AttachRequired == nil || *d.Spec.AttachRequired ||
		!slices.Equal(d.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("CSIDriver %+v", d.Spec)
	}
	sc := csiStorageClassObject()
	if sc.Name != "csi-hostpath" || sc.Provisioner != "hostpath.csi.k8s.io" || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("StorageClass %+v", sc)
	}
	if _, isDefault := sc.Annotations["storageclass.kubernetes.io/is-default-class"]; isDefault {
		t.Error("csi-hostpath must not take over the default class from standard")
	}
	vsc := csiSnapshotClassObject()
	driver, _, _ := unstructured.NestedString(vsc.Object, "driver")
	policy, _, _ := unstructured.NestedString(vsc.Object, "deletionPolicy")
	if vsc.GetName() != "csi-hostpath-snapclass" || driver != csiDriverName || policy != "Delete" ||
		vsc.GetAnnotations()["snapshot.storage.kubernetes.io/is-default-class"] != "true" || vsc.GetAPIVersion() != "snapshot.storage.k8s.io/v1" {
		t.Errorf("VolumeSnapshotClass %v", vsc.Object)
	}
}

func TestCSISmokeObjects(t *testing.T) {
	pvc := smokeClaim("restored", "snap")
	if ds := pvc.Spec.DataSource; ds == nil || *ds.APIGroup != "snapshot.storage.k8s.io" || ds.Kind != "VolumeSnapshot" || ds.Name != "snap" {
		t.Errorf("restored claim's dataSource %+v", pvc.Spec.DataSource)
	}
	if *pvc.Spec.StorageClassName != csiStorageClass {
		t.Errorf("class %s", *pvc.Spec.StorageClassName)
	}
	if smokeClaim("data", "").Spec.DataSource != nil {
		t.Error("a new claim has no dataSource")
	}
	c := preProvisionedContent("c", "snapshot-1", "b", "snap")
	for path, want := range map[string]string{
		"spec.deletionPolicy": "Retain", "spec.driver": csiDriverName, "spec.source.snapshotHandle": "snapshot-1",
		"spec.volumeSnapshotRef.namespace": "b", "spec.volumeSnapshotRef.name": "snap",
	} {
		if got, _, _ := unstructured.NestedString(c.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("content %s = %q, want %q", path, got, want)
		}
	}
	s := smokeVolumeSnapshot("snap", "", "c")
	if got, _, _ := unstructured.NestedString(s.Object, "spec", "source", "volumeSnapshotContentName"); got != "c" {
		t.Errorf("pre-provisioned snapshot source %v", s.Object)
	}
	if _, found, _ := unstructured.NestedString(s.Object, "spec", "source", "persistentVolumeClaimName"); found {
		t.Errorf("a snapshot has one source: %v", s.Object)
	}
}

// The CRD files the real tier installs are those build.sh copies; a build set without them runs
// without CSI.
func TestCSIEnabledAndCRDFiles(t *testing.T) {
	dir := t.TempDir()
	if csiEnabled(dir) {
		t.Fatal("enabled without snapshot-crds/")
	}
	if err := os.Mkdir(filepath.Join(dir, "snapshot-crds"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !csiEnabled(dir) {
		t.Fatal("not enabled with snapshot-crds/")
	}
	t.Setenv("SANDCASTLE_REAL_CSI", "0")
	if csiEnabled(dir) {
		t.Fatal("enabled with SANDCASTLE_REAL_CSI=0")
	}
	build, err := os.ReadFile("../real-node/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range csiSnapshotCRDFiles {
		kind := strings.TrimSuffix(strings.TrimPrefix(f, "snapshot.storage.k8s.io_"), ".yaml")
		if !strings.Contains(string(build), kind) {
			t.Errorf("build.sh does not copy %s", f)
		}
	}
}
