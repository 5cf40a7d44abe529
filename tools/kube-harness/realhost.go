// realhost.go checks that this host can run the real node, answering with one sentence that
// names what is missing.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// hostFacts is what the check reads from the host (a seam for the unit test).
type hostFacts struct {
	goos        string
	euid        int
	filesystems string // /proc/filesystems
	hasFile     func(string) bool
	lookPath    func(string) bool
}

func realHostFacts() hostFacts {
	fs, _ := os.ReadFile("/proc/filesystems")
	return hostFacts{
		goos: runtime.GOOS, euid: os.Geteuid(), filesystems: string(fs),
		hasFile:  func(p string) bool { _, err := os.Stat(p); return err == nil },
		lookPath: func(n string) bool { _, err := exec.LookPath(n); return err == nil },
	}
}

// realHostProblem names the first thing the host lacks for the real node, or nil.
func realHostProblem(h hostFacts) error {
	switch {
	case h.goos != "linux":
		return fmt.Errorf("the real tier needs Linux; this is %s", h.goos)
	case h.euid != 0:
		return errors.New("the real tier needs root (containers, mounts and network namespaces); run it as root")
	case !h.hasFile("/sys/fs/cgroup/memory/memory.limit_in_bytes") && !h.hasFile("/sys/fs/cgroup/cgroup.controllers"):
		return errors.New("the real tier needs cgroups (v1 with the memory controller, or v2) mounted at /sys/fs/cgroup")
	case !strings.Contains(h.filesystems, "\toverlay\n"):
		return errors.New("the real tier needs overlayfs, which this kernel does not offer (/proc/filesystems)")
	case !h.hasFile("/proc/self/ns/net") || !h.hasFile("/proc/self/ns/pid"):
		return errors.New("the real tier needs network and PID namespaces, which this kernel does not offer")
	}
	for _, tool := range []struct{ name, pkg string }{
		{"runc", "runc"}, {"nft", "nftables"}, {"nsenter", "util-linux"}, {"ip", "iproute2"},
	} {
		if !h.lookPath(tool.name) {
			return fmt.Errorf("the real tier needs %s (Debian package %s): run scripts/kube-harness build --real", tool.name, tool.pkg)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if !h.hasFile(cniBinDir + "/" + plugin) {
			return fmt.Errorf("the real tier needs the CNI plugin %s/%s (Debian package containernetworking-plugins): run scripts/kube-harness build --real", cniBinDir, plugin)
		}
	}
	return nil
}
