// Command mkimage writes a container image as a docker-archive tar (what `docker save` writes and
// `ctr images import` reads) from files on this machine: one layer, no registry, no Docker. The
// output depends only on its inputs (fixed times and owners, sorted entries), so an image's ID
// names its content.
//
//	mkimage -o app.tar -tag sandcastle.test/app:c1 -add ./testapp:/app:0755 \
//	    -env APP_COMMIT=c1 -label org.opencontainers.image.revision=c1 -entrypoint /app
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		out                                   string
		tags, adds, links, dirs, envs, labels listFlag
		entrypoint, cmd                       listFlag
		workdir, user                         string
	)
	flag.StringVar(&out, "o", "", "output tar file")
	flag.Var(&tags, "tag", "image reference to tag the image with (repeatable)")
	flag.Var(&adds, "add", "SRC:DST[:MODE]: a file of this machine put at DST (repeatable; symlinks followed)")
	flag.Var(&links, "symlink", "DST=TARGET: a symbolic link (repeatable)")
	flag.Var(&dirs, "dir", "DST[:MODE]: an empty directory (repeatable)")
	flag.Var(&envs, "env", "K=V: an environment variable of the image (repeatable)")
	flag.Var(&labels, "label", "K=V: a label of the image (repeatable)")
	flag.Var(&entrypoint, "entrypoint", "one word of the entrypoint (repeatable, in order)")
	flag.Var(&cmd, "cmd", "one word of the default arguments (repeatable, in order)")
	flag.StringVar(&workdir, "workdir", "/", "working directory")
	flag.StringVar(&user, "user", "", "user the process runs as (default root)")
	flag.Parse()
	if err := run(out, spec{
		tags: tags, adds: adds, links: links, dirs: dirs, envs: envs, labels: labels,
		entrypoint: entrypoint, cmd: cmd, workdir: workdir, user: user,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(out string, s spec) error {
	if out == "" || len(s.tags) == 0 {
		return fmt.Errorf("-o and at least one -tag are required")
	}
	files, err := s.files()
	if err != nil {
		return err
	}
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	if err := writeArchive(f, files, s); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
