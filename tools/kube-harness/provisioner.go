// provisioner.go is a minimal dynamic volume provisioner for the fake node: a default
// StorageClass whose claims get a hostPath PersistentVolume bound to them, and whose released
// volumes are deleted. Without it, StatefulSets with volumeClaimTemplates never schedule.
package main

import (
	"context"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const (
	storageClassName = "standard"
	provisionerName  = "kube-harness.sandcastle.dev/hostpath"
)

func runProvisioner(ctx context.Context, cs *kubernetes.Clientset, root string) {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        storageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	for {
		_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		logf("provisioner: creating storage class: %v", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}

	factory := informers.NewSharedInformerFactory(cs, 30*time.Second)
	pvcs := factory.Core().V1().PersistentVolumeClaims()
	pvs := factory.Core().V1().PersistentVolumes()
	kick := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(kick) },
		UpdateFunc: func(any, any) { poke(kick) },
		DeleteFunc: func(any) { poke(kick) },
	}
	_, _ = pvcs.Informer().AddEventHandler(notify)
	_, _ = pvs.Informer().AddEventHandler(notify)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		claims, _ := pvcs.Lister().List(labels.Everything())
		for _, pvc := range claims {
			if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
				continue
			}
			if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != storageClassName {
				continue
			}
			name := "pvc-" + string(pvc.UID)
			if _, err := pvs.Lister().Get(name); err == nil {
				continue
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisionerName},
				},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
					AccessModes:                   pvc.Spec.AccessModes,
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
					StorageClassName:              storageClassName,
					VolumeMode:                    pvc.Spec.VolumeMode,
					ClaimRef: &corev1.ObjectReference{
						Kind: "PersistentVolumeClaim", APIVersion: "v1",
						Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
					},
					PersistentVolumeSource: corev1.PersistentVolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(root, name)},
					},
				},
			}
			if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				logf("provisioner: creating %s for %s/%s: %v", name, pvc.Namespace, pvc.Name, err)
				poke(kick)
			}
		}
		volumes, _ := pvs.Lister().List(labels.Everything())
		for _, pv := range volumes {
			if pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisionerName || pv.DeletionTimestamp != nil {
				continue
			}
			if pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
				err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					logf("provisioner: deleting %s: %v", pv.Name, err)
				}
			}
		}
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
