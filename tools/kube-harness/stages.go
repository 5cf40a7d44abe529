// stages.go writes kwok's stage file: kwok's own default node and pod stages, then any extra
// stages the caller ships (Sandcastle's tests use them to make annotated pods fail, crash-loop
// or never become ready).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func writeStages(path string, extra []string) error {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for _, e := range extra {
		files, err := stageFiles(e)
		if err != nil {
			return err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			docs = append(docs, string(data))
			logf("loaded extra kwok stages from %s", f)
		}
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---"))
	}
	return os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600)
}

func stageFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("extra stages: %w", err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(p, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return files, nil
}
