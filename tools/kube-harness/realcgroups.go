// realcgroups.go removes the node's cgroups (the kubelet's kubepods tree in every hierarchy)
// once no process is left in them.
package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const cgroupMount = "/sys/fs/cgroup"

// removeStaleCgroups removes every kubepods tree under /sys/fs/cgroup, deepest first, retrying
// for a few seconds while the kernel finishes killing what was in them.
func removeStaleCgroups() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := removeCgroupTrees(cgroupMount, "kubepods")
		if left == 0 || time.Now().After(deadline) {
			if left > 0 {
				logf("%d kubepods cgroups could not be removed", left)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeCgroupTrees removes the trees named name directly under each hierarchy of mount and
// returns how many folders are left.
func removeCgroupTrees(mount, name string) int {
	roots, _ := filepath.Glob(filepath.Join(mount, "*", name))
	var dirs []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	// Deepest first: a cgroup goes only once its children have.
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	left := 0
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			left++
		}
	}
	return left
}
