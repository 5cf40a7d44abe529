// realsmoke.go proves the real tier end to end (`up --real --smoke`): the test app and Redis run
// as a Deployment and a StatefulSet behind Services and an Ingress; Traefik serves the app's
// commit for the preview host; its counter goes up (Redis found by its Service's DNS name); the
// app swapped to another commit's image is served; a Service answers from the host; logs are
// served; a container over its memory limit ends OOMKilled; a missing image is reported as such;
// deleting the namespace removes its containers. realsmokefront.go adds the front door's checks:
// forwardAuth through an Ingress and an HTTPRoute, and TLS on the websecure entry point.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const smokeHost = "smoke.preview.localhost"

func realSmoke(ctx context.Context, cs *kubernetes.Clientset, n *realNode) error {
	ns := fmt.Sprintf("real-smoke-%d", time.Now().UnixNano()%1_000_000)
	rc, err := clientcmd.BuildConfigFromFlags("", n.admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	authAddr, stopAuth, err := startSmokeAuth()
	if err != nil {
		return fmt.Errorf("forwardAuth server: %w", err)
	}
	defer stopAuth()
	pool, certPEM, keyPEM, err := smokeCert()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	steps := []struct {
		what string
		run  func() error
	}{
		{"create the app, Redis, Services, Ingresses, a Middleware, a TLS Secret, a Gateway and an HTTPRoute", func() error {
			if err := createSmokeApp(ctx, cs, ns); err != nil {
				return err
			}
			return createSmokeFrontDoor(ctx, cs, dyn, n, ns, authAddr, certPEM, keyPEM)
		}},
		{"app and Redis ready", func() error { return smokeWorkloadsReady(ctx, cs, ns) }},
		{"commit and counter through Traefik", func() error { return smokeThroughIngress(ctx, n.webAddr) }},
		{"forwardAuth (Ingress, HTTPRoute) and TLS (Ingress, Gateway) through Traefik", func() error { return smokeFrontDoor(ctx, n, pool) }},
		{"the image swapped to another commit", func() error { return smokeImageSwap(ctx, cs, ns, n.webAddr) }},
		{"a Service from the host", func() error { return smokeServiceFromHost(ctx, cs, ns) }},
		{"logs", func() error { return smokeRealLogs(ctx, cs, ns) }},
		{"OOMKilled", func() error { return smokeOOM(ctx, cs, ns) }},
		{"missing images", func() error { return smokeMissingImages(ctx, cs, ns) }},
		{"namespace deleted, containers gone", func() error { return smokeDeleteNamespace(ctx, cs, dyn, n, ns) }},
		{"no error in Traefik's log", func() error { return smokeTraefikLog(n) }},
	}
	if n.csi {
		steps = append(steps, struct {
			what string
			run  func() error
		}{"volume snapshots restored, in the same and in another namespace", func() error {
			figures, err := csiSmoke(ctx, cs, dyn)
			if err == nil {
				logf("real smoke: %s", figures)
			}
			return err
		}})
	}
	for _, s := range steps {
		started := time.Now()
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		logf("real smoke: %s (%s)", s.what, time.Since(started).Round(time.Millisecond))
	}
	return nil
}

func appContainer(image string, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name: "app", Image: image, ImagePullPolicy: corev1.PullNever, Env: env,
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
	}
}

func createSmokeApp(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	app := appContainer("sandcastle.test/app:c1", corev1.EnvVar{Name: "REDIS_ADDR", Value: "redis:6379"})
	app.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	appLabels := map[string]string{"app": "app"}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: appLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: appLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{app}, TerminationGracePeriodSeconds: ptr.To[int64](5)},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	redisLabels := map[string]string{"app": "redis"}
	redis := corev1.Container{
		Name: "redis", Image: "sandcastle.test/redis:7", ImagePullPolicy: corev1.PullNever,
		Ports: []corev1.ContainerPort{{ContainerPort: 6379}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}},
			PeriodSeconds: 1,
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "redis"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "redis", Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: redisLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: redisLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{redis}, TerminationGracePeriodSeconds: ptr.To[int64](5)},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for name, port := range map[string]int32{"app": 8080, "redis": 6379} {
		svcPort := port
		if name == "app" {
			svcPort = 80
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Port: svcPort, TargetPort: intstr.FromInt32(port)}},
			},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	_, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, appIngress("app", smokeHost), metav1.CreateOptions{})
	return err
}

func smokeWorkloadsReady(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	return waitFor(ctx, "deployment app and statefulset redis ready", 2*time.Minute, func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "redis", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ReadyReplicas < 1 || s.Status.ReadyReplicas < 1 {
			return false, fmt.Errorf("ready: app %d, redis %d; %s", d.Status.ReadyReplicas, s.Status.ReadyReplicas, podStates(ctx, cs, ns))
		}
		return true, nil
	})
}

// podStates says, for an error message, where each pod of ns is.
func podStates(ctx context.Context, cs *kubernetes.Clientset, ns string) string {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		state := string(p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				state += " " + w.Reason + ": " + w.Message
			}
		}
		out = append(out, p.Name+" "+state)
	}
	return strings.Join(out, "; ")
}

// smokeHTTP gives up on a request after a few seconds, so that polling goes on: while a
// Deployment's pod is replaced, Traefik may still dial the old pod's address for up to 2 s (its
// throttle) and such a dial waits 30 s before Traefik answers 504.
var smokeHTTP = &http.Client{Timeout: 3 * time.Second}

type appInfo struct {
	Commit  string `json:"commit"`
	Counter *int64 `json:"counter"`
}

// getInfo asks the app for /api/info through Traefik, as a visitor of the preview host does,
// and wants it to serve commit c1.
func getInfo(ctx context.Context, webAddr string) (appInfo, error) {
	return getInfoOf(ctx, webAddr, "c1")
}

func getInfoOf(ctx context.Context, webAddr, commit string) (appInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+webAddr+"/api/info", nil)
	if err != nil {
		return appInfo{}, err
	}
	req.Host = smokeHost
	resp, err := smokeHTTP.Do(req)
	if err != nil {
		return appInfo{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return appInfo{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if got := resp.Header.Get("X-Commit"); got != commit {
		return appInfo{}, fmt.Errorf("X-Commit %q, want %s", got, commit)
	}
	var info appInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return appInfo{}, fmt.Errorf("%w: %s", err, body)
	}
	if info.Counter == nil {
		return appInfo{}, fmt.Errorf("no counter: %s", body)
	}
	return info, nil
}

func smokeThroughIngress(ctx context.Context, webAddr string) error {
	var first appInfo
	if err := waitFor(ctx, "the app through Traefik", time.Minute, func() (bool, error) {
		info, err := getInfo(ctx, webAddr)
		first = info
		return err == nil, err
	}); err != nil {
		return err
	}
	second, err := getInfo(ctx, webAddr)
	if err != nil {
		return err
	}
	if *second.Counter != *first.Counter+1 {
		return fmt.Errorf("counter went from %d to %d, want +1", *first.Counter, *second.Counter)
	}
	return nil
}

// smokeImageSwap runs the app's next commit (another image) and waits until Traefik serves it,
// as a preview does when its pull request gets a new commit.
func smokeImageSwap(ctx context.Context, cs *kubernetes.Clientset, ns, webAddr string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Template.Spec.Containers[0].Image = "sandcastle.test/app:c2"
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return waitFor(ctx, "commit c2 through Traefik", time.Minute, func() (bool, error) {
		_, err := getInfoOf(ctx, webAddr, "c2")
		return err == nil, err
	})
}

func smokeServiceFromHost(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		return err
	}
	return waitFor(ctx, "service app from the host", 30*time.Second, func() (bool, error) {
		err := httpOK(nil, "http://"+svc.Spec.ClusterIP+"/healthz")
		return err == nil, err
	})
}

func smokeRealLogs(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	return waitFor(ctx, "logs of the app", 30*time.Second, func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Errorf("pods of app: %v", err)
		}
		name := ""
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == "sandcastle.test/app:c2" {
				name = p.Name
			}
		}
		if name == "" {
			return false, fmt.Errorf("no pod of app at commit c2")
		}
		out, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		if !strings.Contains(string(out), "listening on :8080, commit c2") || !strings.Contains(string(out), "GET /api/info") {
			return false, fmt.Errorf("logs %q", out)
		}
		return true, nil
	})
}

func createPod(ctx context.Context, cs *kubernetes.Clientset, ns, name string, c corev1.Container) error {
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}},
	}, metav1.CreateOptions{})
	return err
}

// containerState waits until the pod's container is in a state check accepts.
func containerState(ctx context.Context, cs *kubernetes.Clientset, ns, pod string, check func(corev1.ContainerState) bool) error {
	return waitFor(ctx, "pod "+pod, time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.ContainerStatuses {
			if check(c.State) {
				return true, nil
			}
			return false, fmt.Errorf("state %+v", c.State)
		}
		return false, fmt.Errorf("phase %s, no container status yet", p.Status.Phase)
	})
}

func smokeOOM(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	c := appContainer("sandcastle.test/app:c1", corev1.EnvVar{Name: "APP_ALLOCATE_MB", Value: "64"})
	limit := resource.MustParse("16Mi")
	c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: limit}}
	if err := createPod(ctx, cs, ns, "oom", c); err != nil {
		return err
	}
	return containerState(ctx, cs, ns, "oom", func(s corev1.ContainerState) bool {
		return s.Terminated != nil && s.Terminated.Reason == "OOMKilled" && s.Terminated.ExitCode == 137
	})
}

func smokeMissingImages(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	never := appContainer("sandcastle.test/missing:1")
	if err := createPod(ctx, cs, ns, "missing-never", never); err != nil {
		return err
	}
	pull := appContainer("sandcastle.test/missing:1")
	pull.ImagePullPolicy = corev1.PullIfNotPresent
	if err := createPod(ctx, cs, ns, "missing-pull", pull); err != nil {
		return err
	}
	if err := containerState(ctx, cs, ns, "missing-never", func(s corev1.ContainerState) bool {
		return s.Waiting != nil && s.Waiting.Reason == "ErrImageNeverPull"
	}); err != nil {
		return err
	}
	return containerState(ctx, cs, ns, "missing-pull", func(s corev1.ContainerState) bool {
		return s.Waiting != nil && (s.Waiting.Reason == "ErrImagePull" || s.Waiting.Reason == "ImagePullBackOff")
	})
}

// smokeDeleteNamespace deletes ns, waits until it is gone and then until containerd holds no
// container of it. The routes go first: the namespace controller may remove a Service, Secret or
// Middleware before the Ingress or HTTPRoute naming it, and Traefik logs an error for each
// rebuild in between; so an error in Traefik's log after the smoke is worth reading.
func smokeDeleteNamespace(ctx context.Context, cs *kubernetes.Clientset, dyn dynamic.Interface, n *realNode, ns string) error {
	if err := cs.NetworkingV1().Ingresses(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	for _, gvr := range []schema.GroupVersionResource{httpRouteGVR, gatewayGVR} {
		if err := dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, "namespace "+ns+" gone", 2*time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}); err != nil {
		return err
	}
	// The kubelet removes the pods' sandboxes on its container GC, once a minute.
	return waitFor(ctx, "containers of "+ns+" gone", 2*time.Minute, func() (bool, error) {
		out, err := exec.Command(filepath.Join(n.bin, "ctr"), "--address", n.paths.containerdSocket(), "-n", "k8s.io",
			"containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.pod.namespace"==%s`, ns)).Output()
		if err != nil {
			return false, fmt.Errorf("ctr containers ls: %v: %s", err, out)
		}
		if left := strings.Fields(string(out)); len(left) > 0 {
			return false, fmt.Errorf("%d containers left", len(left))
		}
		return true, nil
	})
}

// smokeTraefikLog wants no error in Traefik's log so far: a provider that cannot list or watch
// what it needs (RBAC, a CRD missing) logs one at every retry.
func smokeTraefikLog(n *realNode) error {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(n.paths.root), "logs", "traefik.log"))
	if err != nil {
		return err
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, " ERR ") {
			errs = append(errs, line)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d errors, the first: %s", len(errs), errs[0])
	}
	return nil
}
