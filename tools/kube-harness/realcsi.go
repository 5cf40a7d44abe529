// realcsi.go gives the real tier volumes that can be snapshotted and restored (docs/real-tier.md,
// "Volumes and snapshots"): the VolumeSnapshot CRDs, the CSIDriver hostpath.csi.k8s.io with its
// StorageClass csi-hostpath and VolumeSnapshotClass csi-hostpath-snapclass, the driver
// (`kube-harness csi-hostpath`) inside the node, and beside the control plane on the host
// external-provisioner, csi-snapshotter and snapshot-controller.
//
// Why host processes rather than pods: no container registry is reachable, so the sidecars would
// need images built here, and the driver a privileged pod with Bidirectional mount propagation
// into the kubelet's folder; the node is a set of namespaces whose processes the harness already
// starts with nsenter, so the driver is one more of them (its bind mounts land in the node's mount
// namespace, where the kubelet and containerd look), and the sidecars, which only talk to the API
// and to the driver's unix socket (a file under the run folder, reachable from the host), run on
// the host as Traefik does. The driver registers with the kubelet through its plugin registration
// folder, which is what node-driver-registrar would do.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const (
	csiStorageClass  = "csi-hostpath"
	csiSnapshotClass = "csi-hostpath-snapclass"
)

var (
	volumeSnapshotGVR        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	volumeSnapshotContentGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	volumeSnapshotClassGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

// csiEnabled: the real tier's build holds the CSI parts (snapshot-crds/ and the sidecars) and
// SANDCASTLE_REAL_CSI is not 0; a build made before them, or that switch, runs the real tier
// without volumes that snapshot, as before.
func csiEnabled(realDir string) bool {
	if os.Getenv("SANDCASTLE_REAL_CSI") == "0" {
		return false
	}
	_, err := os.Stat(filepath.Join(realDir, "snapshot-crds"))
	return err == nil
}

func (n nodePaths) csiRoot() string   { return n.path("csi-hostpath") }
func (n nodePaths) csiSocket() string { return n.path("csi-hostpath", "csi.sock") }

// csiDriverObject tells the kubelet and the controllers how to treat the driver: nothing to
// attach (no external-attacher runs), volumes only as PersistentVolumes.
func csiDriverObject() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: csiDriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		},
	}
}

// csiStorageClassObject is the CSI class beside the default `standard` (the harness's own
// provisioner, unchanged): claims name it to get volumes that can be snapshotted.
func csiStorageClassObject() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: csiStorageClass},
		Provisioner:       csiDriverName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// csiSnapshotClassObject is the default VolumeSnapshotClass for the driver.
func csiSnapshotClassObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{
			"name":        csiSnapshotClass,
			"annotations": map[string]any{"snapshot.storage.kubernetes.io/is-default-class": "true"},
		},
		"driver": csiDriverName, "deletionPolicy": "Delete",
	}}
}

// setupRealCSI creates the driver's cluster objects; setupRealCluster installed the
// VolumeSnapshot CRDs with the others.
func setupRealCSI(ctx context.Context, cs *kubernetes.Clientset, kubeconfig string) error {
	if err := create(ctx, "csidriver "+csiDriverName, cs.StorageV1().CSIDrivers().Create, csiDriverObject()); err != nil {
		return err
	}
	if err := create(ctx, "storageclass "+csiStorageClass, cs.StorageV1().StorageClasses().Create, csiStorageClassObject()); err != nil {
		return err
	}
	dyn, err := dynamicClient(kubeconfig)
	if err != nil {
		return err
	}
	// The class's kind may answer 404 for a moment after its CRD is Established.
	return waitFor(ctx, "VolumeSnapshotClass "+csiSnapshotClass, time.Minute, func() (bool, error) {
		_, err := dyn.Resource(volumeSnapshotClassGVR).Create(ctx, csiSnapshotClassObject(), metav1.CreateOptions{FieldManager: harnessManager})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
}

func dynamicClient(kubeconfig string) (*dynamic.DynamicClient, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(rc)
}

// csiSnapshotCRDFiles are the CRDs build.sh copies into snapshot-crds/ (from the
// external-snapshotter client module's config/crd): the three snapshot.storage.k8s.io kinds,
// not the volume group snapshot ones (that feature stays off).
var csiSnapshotCRDFiles = []string{
	"snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
	"snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
	"snapshot.storage.k8s.io_volumesnapshots.yaml",
}

// csiArgvs are the CSI processes: the driver inside the node, the sidecars and
// snapshot-controller on the host with the admin kubeconfig (a test cluster's controllers; the
// harness gives them no narrower identity). CSIVolumeGroupSnapshot is on by default in
// external-snapshotter v8.7 and its two processes would first wait for CRDs this tier does not
// install: it is turned off.
func csiArgvs(self, bin string, n nodePaths, initPID int, adminKubeconfig string) map[string][]string {
	sock := n.csiSocket()
	return map[string][]string{
		"csi-hostpath": inNode(initPID, self, "csi-hostpath", "--root", n.csiRoot(), "--endpoint", sock,
			"--node", realNodeName, "--kubelet-root", n.kubeletRoot()),
		"csi-provisioner": {filepath.Join(bin, "csi-provisioner"), "--csi-address=" + sock,
			"--kubeconfig=" + adminKubeconfig, "--leader-election=false", "--timeout=30s",
			"--retry-interval-max=5s", "--v=2"},
		"csi-snapshotter": {filepath.Join(bin, "csi-snapshotter"), "--csi-address=" + sock,
			"--kubeconfig=" + adminKubeconfig, "--leader-election=false", "--timeout=30s",
			"--retry-interval-max=5s", "--feature-gates=CSIVolumeGroupSnapshot=false", "--v=2"},
		"snapshot-controller": {filepath.Join(bin, "snapshot-controller"), "--kubeconfig=" + adminKubeconfig,
			"--leader-election=false", "--retry-interval-max=5s", "--feature-gates=CSIVolumeGroupSnapshot=false", "--v=2"},
	}
}

// startCSI starts the driver and then the processes that dial its socket.
func (cp *controlPlane) startCSI(ctx context.Context, n *realNode) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argvs := csiArgvs(self, n.bin, n.paths, n.initPID, cp.opts.kubeconfig)
	if err := cp.spawnArgv("csi-hostpath", argvs["csi-hostpath"], nil, nil); err != nil {
		return err
	}
	if err := cp.poll(ctx, "CSI driver socket", func() error {
		_, err := os.Stat(n.paths.csiSocket())
		return err
	}); err != nil {
		return err
	}
	for _, name := range []string{"csi-provisioner", "csi-snapshotter", "snapshot-controller"} {
		if err := cp.spawnArgv(name, argvs[name], nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// csiReady: the kubelet has registered the driver (the node's CSINode names it).
func csiReady(ctx context.Context, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	node, err := cs.StorageV1().CSINodes().Get(ctx, realNodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("csinode %s: %w", realNodeName, err)
	}
	for _, d := range node.Spec.Drivers {
		if d.Name == csiDriverName {
			return nil
		}
	}
	return fmt.Errorf("the kubelet has not registered %s yet", csiDriverName)
}
