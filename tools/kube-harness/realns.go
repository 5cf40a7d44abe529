// realns.go holds the real node's namespaces. `kube-harness node-init` runs as PID 1 of new PID,
// mount and network namespaces: it shadows the host folders that containerd and the kubelet
// write to with private tmpfs mounts, turns on forwarding in its network namespace, and then only
// reaps orphans until it is told to stop. Every node process (containerd and its shims and
// containers, the kubelet, kube-proxy, CoreDNS) is started inside these namespaces with nsenter.
// When node-init exits, the kernel kills everything left in its PID namespace, and the mounts,
// the pods' bridge and network namespaces and every nftables rule go with the namespaces: a
// crash leaves nothing running and nothing mounted on the host.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// shadowed are the host folders node processes write to whatever their configuration says:
// containerd's shim sockets and NRI (/run), the CNI cache, the kubelet's log links. Inside the
// node they are private tmpfs mounts.
var shadowed = []string{"/run", "/var/lib/cni", "/var/log/containers", "/var/log/pods"}

// nodeSysctls are set inside the node's network namespace: forwarding between the host link and
// the pods' bridge, and bridged traffic through netfilter (Services between pods on the bridge).
var nodeSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// runNodeInit is `kube-harness node-init <ready-file> <created-dirs-file>`.
func runNodeInit(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kube-harness node-init <ready-file> <created-dirs-file>")
		return 2
	}
	if err := setupNodeMounts(args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "node-init:", err)
		return 1
	}
	for key, value := range nodeSysctls {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "node-init: sysctl %s: %v\n", key, err)
			if key == "net/ipv4/ip_forward" {
				return 1
			}
		}
	}
	if err := os.WriteFile(args[0], []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "node-init:", err)
		return 1
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return 0
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}

// setupNodeMounts makes this mount namespace a slave of the host's (nothing mounted here shows on
// the host) and shared within (the kubelet's volume mounts reach containerd's containers), mounts
// /proc for the new PID namespace, and shadows the host folders node processes write to. Folders
// that had to be created on the host are listed in createdFile, for `stop` to remove.
func setupNodeMounts(createdFile string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave mount: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared inside the node: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	var created []string
	for _, dir := range shadowed {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			created = append(created, dir)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755"); err != nil {
			return fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
		}
	}
	return os.WriteFile(createdFile, []byte(strings.Join(created, "\n")), 0o600)
}

// removeCreatedDirs removes the host folders node-init created (listed in createdFile) if they
// are empty again, deepest first.
func removeCreatedDirs(createdFile string) {
	data, err := os.ReadFile(createdFile)
	if err != nil {
		return
	}
	dirs := strings.Fields(string(data))
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(filepath.Clean(dirs[i]))
	}
}

// nodeInitAttrs are the process attributes that put node-init into new namespaces.
func nodeInitAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
}

// inNode is the argv that runs argv inside the node's namespaces (node-init's host PID).
func inNode(initPID int, argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(initPID), "--mount", "--net", "--pid", "--uts", "--"}, argv...)
}
