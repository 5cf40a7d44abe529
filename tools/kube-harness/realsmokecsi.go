// realsmokecsi.go proves the real tier's volumes and snapshots (realcsi.go): a claim on
// csi-hostpath is bound, a pod writes a file on it, a VolumeSnapshot of it becomes readyToUse, a
// claim restored from it is bound and a pod reads the file back; then the documented way to
// restore in another namespace: a pre-provisioned VolumeSnapshotContent (Retain) naming the
// first snapshot's handle, bound to a VolumeSnapshot created in that namespace, and a claim there
// restored from it. It runs in `up --real --smoke` and alone, against a running real tier, as
// `kube-harness csi-smoke --kubeconfig FILE` (scripts/kube-harness csi-smoke).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// csiSmokeFigures are the smoke's timings, logged and kept for the docs.
type csiSmokeFigures struct {
	bound, written, snapshotReady, restored, crossNamespace, cleanedUp time.Duration
}

func (f csiSmokeFigures) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("claim bound %s, file written %s, snapshot readyToUse %s, restored and read back %s, "+
		"restored in another namespace %s, cleaned up %s",
		r(f.bound), r(f.written), r(f.snapshotReady), r(f.restored), r(f.crossNamespace), r(f.cleanedUp))
}

// runCSISmoke is `kube-harness csi-smoke --kubeconfig FILE`.
func runCSISmoke(args []string) int {
	fset := flag.NewFlagSet("csi-smoke", flag.ContinueOnError)
	kubeconfig := fset.String("kubeconfig", os.Getenv("KUBECONFIG"), "the real tier's admin kubeconfig")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-smoke:", err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-smoke:", err)
		return 1
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-smoke:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	figures, err := csiSmoke(ctx, cs, dyn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-smoke:", err)
		return 1
	}
	logf("csi smoke passed in %s: %s", time.Since(started).Round(time.Millisecond), figures)
	return 0
}

func smokeClaim(name, fromSnapshot string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(csiStorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Mi"),
			}},
		},
	}
	if fromSnapshot != "" {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{
			APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: fromSnapshot,
		}
	}
	return pvc
}

// smokeVolumePod runs script in busybox with the claim mounted on /data.
func smokeVolumePod(name, claim, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "sh", Image: "sandcastle.test/busybox:1", ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

func smokeVolumeSnapshot(name, fromClaim, fromContent string) *unstructured.Unstructured {
	source := map[string]any{"persistentVolumeClaimName": fromClaim}
	if fromContent != "" {
		source = map[string]any{"volumeSnapshotContentName": fromContent}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"volumeSnapshotClassName": csiSnapshotClass, "source": source},
	}}
}

// preProvisionedContent is a VolumeSnapshotContent for an existing snapshot (its handle), bound
// in advance to the VolumeSnapshot ns/name; Retain, so deleting that VolumeSnapshot leaves the
// snapshot to its first owner.
func preProvisionedContent(name, handle, ns, snapshot string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"deletionPolicy":          "Retain",
			"driver":                  csiDriverName,
			"volumeSnapshotClassName": csiSnapshotClass,
			"source":                  map[string]any{"snapshotHandle": handle},
			"volumeSnapshotRef":       map[string]any{"name": snapshot, "namespace": ns},
		},
	}}
}

func csiSmoke(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) (csiSmokeFigures, error) {
	var f csiSmokeFigures
	suffix := time.Now().UnixNano() % 1_000_000
	nsA, nsB := fmt.Sprintf("csi-smoke-%d", suffix), fmt.Sprintf("csi-smoke-%d-b", suffix)
	content := nsB + "-content"
	token := fmt.Sprintf("sandcastle-%d", time.Now().UnixNano())
	for _, ns := range []string{nsA, nsB} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return f, err
		}
	}
	err := func() error {
		t := time.Now()
		if _, err := cs.CoreV1().PersistentVolumeClaims(nsA).Create(ctx, smokeClaim("data", ""), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := claimBound(ctx, cs, nsA, "data"); err != nil {
			return err
		}
		f.bound = time.Since(t)
		t = time.Now()
		if err := runVolumePod(ctx, cs, nsA, smokeVolumePod("writer", "data", "echo "+token+" > /data/hello && sync"), ""); err != nil {
			return err
		}
		f.written = time.Since(t)
		t = time.Now()
		if _, err := dyn.Resource(volumeSnapshotGVR).Namespace(nsA).Create(ctx, smokeVolumeSnapshot("snap", "data", ""), metav1.CreateOptions{}); err != nil {
			return err
		}
		contentA, err := snapshotReady(ctx, dyn, nsA, "snap")
		if err != nil {
			return err
		}
		f.snapshotReady = time.Since(t)
		t = time.Now()
		if err := restoreAndRead(ctx, cs, nsA, "snap", token); err != nil {
			return err
		}
		f.restored = time.Since(t)
		c, err := dyn.Resource(volumeSnapshotContentGVR).Get(ctx, contentA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		handle, _, _ := unstructured.NestedString(c.Object, "status", "snapshotHandle")
		if handle == "" {
			return fmt.Errorf("volumesnapshotcontent %s has no status.snapshotHandle", contentA)
		}
		t = time.Now()
		if _, err := dyn.Resource(volumeSnapshotContentGVR).Create(ctx, preProvisionedContent(content, handle, nsB, "snap"), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := dyn.Resource(volumeSnapshotGVR).Namespace(nsB).Create(ctx, smokeVolumeSnapshot("snap", "", content), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := snapshotReady(ctx, dyn, nsB, "snap"); err != nil {
			return fmt.Errorf("in %s, from the pre-provisioned content: %w", nsB, err)
		}
		if err := restoreAndRead(ctx, cs, nsB, "snap", token); err != nil {
			return fmt.Errorf("in %s: %w", nsB, err)
		}
		f.crossNamespace = time.Since(t)
		return nil
	}()
	t := time.Now()
	if cerr := csiSmokeCleanup(ctx, cs, dyn, []string{nsB, nsA}, content); err == nil && cerr != nil {
		err = fmt.Errorf("cleaning up: %w", cerr)
	}
	f.cleanedUp = time.Since(t)
	return f, err
}

// restoreAndRead restores the claim "restored" from the VolumeSnapshot and wants a pod to read
// want from it.
func restoreAndRead(ctx context.Context, cs kubernetes.Interface, ns, snapshot, want string) error {
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, smokeClaim("restored", snapshot), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := claimBound(ctx, cs, ns, "restored"); err != nil {
		return err
	}
	return runVolumePod(ctx, cs, ns, smokeVolumePod("reader", "restored", "cat /data/hello"), want)
}

func claimBound(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	return waitFor(ctx, "claim "+ns+"/"+name+" bound", time.Minute, func() (bool, error) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("phase %s; %s", pvc.Status.Phase, lastEvent(ctx, cs, ns, "PersistentVolumeClaim", name))
		}
		return true, nil
	})
}

// runVolumePod runs the pod to completion and, when want is set, wants it in the pod's log.
func runVolumePod(ctx context.Context, cs kubernetes.Interface, ns string, pod *corev1.Pod, want string) error {
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, "pod "+ns+"/"+pod.Name+" succeeded", time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return true, nil
		case corev1.PodFailed:
			return false, fmt.Errorf("pod failed: %+v", p.Status.ContainerStatuses)
		}
		return false, fmt.Errorf("phase %s; %s", p.Status.Phase, lastEvent(ctx, cs, ns, "Pod", pod.Name))
	}); err != nil {
		return err
	}
	if want == "" {
		return nil
	}
	out, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(out)); got != want {
		return fmt.Errorf("pod %s/%s read %q, want %q", ns, pod.Name, got, want)
	}
	return nil
}

// snapshotReady waits until the VolumeSnapshot is readyToUse and gives its content's name.
func snapshotReady(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	var content string
	err := waitFor(ctx, "volumesnapshot "+ns+"/"+name+" readyToUse", time.Minute, func() (bool, error) {
		s, err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedBool(s.Object, "status", "readyToUse")
		content, _, _ = unstructured.NestedString(s.Object, "status", "boundVolumeSnapshotContentName")
		if !ready || content == "" {
			msg, _, _ := unstructured.NestedString(s.Object, "status", "error", "message")
			return false, fmt.Errorf("readyToUse %v, content %q, error %q", ready, content, msg)
		}
		return true, nil
	})
	return content, err
}

// lastEvent is the newest event about an object, for an error message.
func lastEvent(ctx context.Context, cs kubernetes.Interface, ns, kind, name string) string {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil || len(evs.Items) == 0 {
		return "no event"
	}
	e := evs.Items[len(evs.Items)-1]
	return e.Reason + ": " + e.Message
}

// csiSmokeCleanup deletes the namespaces (their claims' volumes and the first snapshot go with
// them: both classes delete) and the pre-provisioned content (Retain: deleting it leaves the
// driver alone), and waits until no volume of the driver is left for these namespaces.
func csiSmokeCleanup(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, namespaces []string, content string) error {
	for _, ns := range namespaces {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := waitFor(ctx, "namespaces gone", 2*time.Minute, func() (bool, error) {
		for _, ns := range namespaces {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("namespace %s still there (%v)", ns, err)
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if err := dyn.Resource(volumeSnapshotContentGVR).Delete(ctx, content, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return waitFor(ctx, "volumes and snapshot contents gone", time.Minute, func() (bool, error) {
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && (ref.Namespace == namespaces[0] || ref.Namespace == namespaces[1]) {
				return false, fmt.Errorf("persistentvolume %s (%s) left", pv.Name, pv.Status.Phase)
			}
		}
		contents, err := dyn.Resource(volumeSnapshotContentGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range contents.Items {
			ns, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotRef", "namespace")
			if ns == namespaces[0] || ns == namespaces[1] {
				return false, fmt.Errorf("volumesnapshotcontent %s left", c.GetName())
			}
		}
		return true, nil
	})
}
