package main

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tests decide what a fake pod logs with kwok's Logs (namespaced, one pod) and ClusterLogs
// (cluster-wide, selecting pods by namespace and name); `up` installs exactly the kinds it
// tells kwok to watch.
func TestKwokCRDsAreTheLogKindsKwokWatches(t *testing.T) {
	crds, err := kwokCRDs()
	if err != nil {
		t.Fatal(err)
	}
	wantScope := map[string]apiextensionsv1.ResourceScope{
		"Logs": apiextensionsv1.NamespaceScoped, "ClusterLogs": apiextensionsv1.ClusterScoped,
	}
	if len(crds) != len(kwokCRDKinds) {
		t.Fatalf("%d CRDs for kinds %v", len(crds), kwokCRDKinds)
	}
	for i, crd := range crds {
		kind := crd.Spec.Names.Kind
		if kind != kwokCRDKinds[i] {
			t.Errorf("CRD %d is kind %q, want %q", i, kind, kwokCRDKinds[i])
		}
		if crd.Spec.Group != "kwok.x-k8s.io" || crd.Spec.Scope != wantScope[kind] {
			t.Errorf("%s: group %q scope %q, want kwok.x-k8s.io %q", kind, crd.Spec.Group, crd.Spec.Scope, wantScope[kind])
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || (v.Name == "v1alpha1" && v.Served)
		}
		if !served {
			t.Errorf("%s: v1alpha1 not served", kind)
		}
	}
}

// kwok must not start before its CRDs are served; ensureKwokCRDs is the gate, and running it
// again (a poll) keeps what it made.
func TestEnsureKwokCRDsWaitsUntilEstablished(t *testing.T) {
	ctx := context.Background()
	// NewClientset's field-managed tracker has no schema for CRDs; the simple one does not need it.
	cs := apiextensionsfake.NewSimpleClientset()

	err := ensureKwokCRDs(ctx, cs)
	if err == nil || !strings.Contains(err.Error(), "not Established") {
		t.Fatalf("fresh CRDs: %v, want not Established", err)
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(kwokCRDKinds) {
		t.Fatalf("%d CRDs created, want %d", len(list.Items), len(kwokCRDKinds))
	}
	for i := range list.Items {
		crd := &list.Items[i]
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
		}}
		if _, err := api.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ensureKwokCRDs(ctx, cs); err != nil {
		t.Errorf("established CRDs: %v", err)
	}
}
