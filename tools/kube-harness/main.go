// Command kube-harness is a multi-call binary holding a real Kubernetes control plane for
// Sandcastle's tests and `sandcastle demo`: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, each run as its own process, plus `up`, which starts and supervises
// them all.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage: kube-harness <command> [flags]

commands:
  up                       start a whole control plane and supervise it (see up --help)
  etcd                     run etcd (etcd flags)
  kube-apiserver           run kube-apiserver (its flags)
  kube-controller-manager  run kube-controller-manager (its flags)
  kube-scheduler           run kube-scheduler (its flags)
  kwok                     run kwok, the fake kubelet (its flags)
  node-init                hold the real node's namespaces (started by up --real)
  csi-hostpath             the real node's CSI driver, hostpath.csi.k8s.io (started by up --real)
  csi-smoke                prove a running real tier's volume snapshots and restores (--kubeconfig)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	sub := os.Args[1]
	// Each component sees a normal argv: its own name followed by its flags.
	os.Args = append([]string{sub}, os.Args[2:]...)
	switch sub {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kwok":
		runKwok()
	case "up":
		os.Exit(runUp(os.Args[1:]))
	case "node-init":
		os.Exit(runNodeInit(os.Args[1:]))
	case "csi-hostpath":
		os.Exit(runCSIHostpath(os.Args[1:]))
	case "csi-smoke":
		os.Exit(runCSISmoke(os.Args[1:]))
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kube-harness: unknown command %q\n\n%s", sub, usage)
		os.Exit(2)
	}
}
