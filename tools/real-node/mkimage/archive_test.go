package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testSpec(t *testing.T) spec {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return spec{
		tags: []string{"sandcastle.test/app:c1"}, adds: []string{bin + ":/usr/local/bin/app"},
		links: []string{"/bin/sh=busybox"}, dirs: []string{"/tmp:1777"}, envs: []string{"APP_COMMIT=c1"},
		labels: []string{"org.opencontainers.image.revision=c1"}, entrypoint: []string{"/usr/local/bin/app"}, workdir: "/",
	}
}

func archive(t *testing.T, s spec) []byte {
	t.Helper()
	files, err := s.files()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeArchive(&buf, files, s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func members(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

// The same inputs give the same bytes; another commit gives another image with the same layer.
func TestArchiveIsReproducibleAndTagged(t *testing.T) {
	s := testSpec(t)
	a, b := archive(t, s), archive(t, s)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same inputs differ")
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	m := members(t, a)
	if err := json.Unmarshal(m["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || manifest[0].RepoTags[0] != "sandcastle.test/app:c1" {
		t.Fatalf("manifest %+v", manifest)
	}
	var cfg struct {
		Config struct{ Env []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(m[manifest[0].Config], &cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(cfg.Config.Env, " "), "APP_COMMIT=c1") {
		t.Errorf("env %v", cfg.Config.Env)
	}
	if cfg.RootFS.DiffIDs[0] != "sha256:"+digest(m[manifest[0].Layers[0]]) {
		t.Errorf("diff_id %s does not name the layer", cfg.RootFS.DiffIDs[0])
	}
	s2 := s
	s2.envs = []string{"APP_COMMIT=c2"}
	m2 := members(t, archive(t, s2))
	if _, same := m2[manifest[0].Config]; same {
		t.Error("another commit has the same image configuration (and ID)")
	}
	if _, ok := m2[manifest[0].Layers[0]]; !ok {
		t.Error("another commit does not share the layer")
	}
}

// Parent folders are added, parents before children, with fixed times and owners.
func TestLayerHasParentsFirst(t *testing.T) {
	s := testSpec(t)
	files, err := s.files()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.path)
	}
	want := "/bin /bin/sh /tmp /usr /usr/local /usr/local/bin /usr/local/bin/app"
	if strings.Join(got, " ") != want {
		t.Errorf("entries %v, want %s", got, want)
	}
}

// A path given twice would silently keep only one of them (a link named like the binary it
// points to replaces the binary): refused.
func TestDuplicatePathRefused(t *testing.T) {
	s := testSpec(t)
	s.links = append(s.links, "/usr/local/bin/app=app")
	_, err := s.files()
	if err == nil || !strings.Contains(err.Error(), "/usr/local/bin/app") {
		t.Fatalf("got %v, want a refusal naming /usr/local/bin/app", err)
	}
}
