// archive.go builds the layer and the image configuration and writes them as a docker-archive.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

type spec struct {
	tags, adds, links, dirs, envs, labels []string
	entrypoint, cmd                       []string
	workdir, user                         string
}

// entry is one file, directory or link of the layer.
type entry struct {
	path  string // absolute, cleaned
	mode  int64
	data  []byte
	link  string
	isDir bool
}

// epoch is every entry's time and the image's creation time: the same inputs make the same image.
var epoch = time.Unix(0, 0).UTC()

func (s spec) files() ([]entry, error) {
	var es []entry
	for _, a := range s.adds {
		parts := strings.Split(a, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("-add %q: want SRC:DST[:MODE]", a)
		}
		data, err := os.ReadFile(parts[0])
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if len(parts) == 3 {
			if mode, err = strconv.ParseInt(parts[2], 8, 64); err != nil {
				return nil, fmt.Errorf("-add %q: mode: %w", a, err)
			}
		} else if info, err := os.Stat(parts[0]); err == nil && info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		es = append(es, entry{path: path.Clean("/" + parts[1]), mode: mode, data: data})
	}
	for _, l := range s.links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("-symlink %q: want DST=TARGET", l)
		}
		es = append(es, entry{path: path.Clean("/" + dst), mode: 0o777, link: target})
	}
	for _, d := range s.dirs {
		dst, m, hasMode := strings.Cut(d, ":")
		mode := int64(0o755)
		if hasMode {
			var err error
			if mode, err = strconv.ParseInt(m, 8, 64); err != nil {
				return nil, fmt.Errorf("-dir %q: mode: %w", d, err)
			}
		}
		es = append(es, entry{path: path.Clean("/" + dst), mode: mode, isDir: true})
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.path] {
			return nil, fmt.Errorf("%s is given twice", e.path)
		}
		seen[e.path] = true
	}
	return withParents(es), nil
}

// withParents adds every missing parent directory and sorts entries by path, parents first.
func withParents(es []entry) []entry {
	seen := map[string]bool{}
	for _, e := range es {
		seen[e.path] = true
	}
	for _, e := range es {
		for dir := path.Dir(e.path); dir != "/" && !seen[dir]; dir = path.Dir(dir) {
			seen[dir] = true
			es = append(es, entry{path: dir, mode: 0o755, isDir: true})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	return es
}

func layerTar(es []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: strings.TrimPrefix(e.path, "/"), Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.isDir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func imageConfig(s spec, diffID string) ([]byte, error) {
	labels := map[string]string{}
	for _, l := range s.labels {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, s.envs...)
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Env": env, "Entrypoint": s.entrypoint, "Cmd": s.cmd, "Labels": labels,
			"WorkingDir": s.workdir, "User": s.user,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diffID}},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "sandcastle mkimage"}},
	}
	return json.Marshal(cfg)
}

func writeArchive(w io.Writer, es []entry, s spec) error {
	layer, err := layerTar(es)
	if err != nil {
		return err
	}
	diffID := digest(layer)
	cfg, err := imageConfig(s, diffID)
	if err != nil {
		return err
	}
	cfgName := digest(cfg) + ".json"
	layerName := diffID + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": s.tags, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
