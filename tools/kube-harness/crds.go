// crds.go installs the kwok custom resources that tests create to decide what fake pods log:
// Logs (one pod, in its namespace) and ClusterLogs (pods selected by namespace and name). kwok
// watches them (--enable-crds) and serves the file they point at as the container's log.
package main

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kwokcrd "sigs.k8s.io/kwok/kustomize/crd"
)

// kwokCRDKinds are the kinds passed to kwok's --enable-crds, in the same order as kwokCRDs.
var kwokCRDKinds = []string{"Logs", "ClusterLogs"}

// kwokCRDs are kwok's own definitions of the kinds in kwokCRDKinds, as shipped with kwok v0.8.0.
func kwokCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, data := range [][]byte{kwokcrd.Logs, kwokcrd.ClusterLogs} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("kwok CRD: %w", err)
		}
		crds = append(crds, &crd)
	}
	return crds, nil
}

// ensureKwokCRDs creates kwok's CRDs (those that exist already are kept) and reports whether all
// of them are Established: kwok starts watching them as it starts, so they must be served first.
func ensureKwokCRDs(ctx context.Context, cs apiextensions.Interface) error {
	crds, err := kwokCRDs()
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	var waiting error
	for _, crd := range crds {
		got, err := api.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = api.Get(ctx, crd.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		if !crdEstablished(got) && waiting == nil {
			waiting = fmt.Errorf("CRD %s not Established yet", crd.Name)
		}
	}
	return waiting
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
