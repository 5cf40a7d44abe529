// Command testapp is the small web app the real tier runs in its images: it serves the commit it
// was built for (page, X-Commit header, JSON), counts visits in Redis, stops cleanly on SIGTERM,
// and can be told to allocate memory (an OOM test) or to exit at start (a crash loop).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// commit is the default commit, set at build time (-X main.commit=...).
var commit = "unknown"

type config struct {
	port       int
	commit     string
	redisAddr  string
	allocateMB int
	exitCode   int
}

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		log.Fatalf("%s=%q is not a number", name, v)
	}
	return n
}

// commitFrom picks the commit to serve: APP_COMMIT (baked into each image), else SANDCASTLE_SHA
// (what Sandcastle gives every container), else the build's default.
func commitFrom(getenv func(string) string, def string) string {
	for _, name := range []string{"APP_COMMIT", "SANDCASTLE_SHA"} {
		if v := getenv(name); v != "" {
			return v
		}
	}
	return def
}

func parseConfig() config {
	c := config{
		port:       envInt("PORT", 8080),
		commit:     commitFrom(os.Getenv, commit),
		redisAddr:  os.Getenv("REDIS_ADDR"),
		allocateMB: envInt("APP_ALLOCATE_MB", 0),
		exitCode:   envInt("APP_EXIT_AT_START", 0),
	}
	flag.IntVar(&c.port, "port", c.port, "port to listen on (env PORT)")
	flag.StringVar(&c.commit, "commit", c.commit, "commit to serve (env APP_COMMIT, SANDCASTLE_SHA)")
	flag.StringVar(&c.redisAddr, "redis", c.redisAddr, "Redis host:port holding the counter (env REDIS_ADDR)")
	flag.IntVar(&c.allocateMB, "allocate-mb", c.allocateMB, "allocate and touch this many MiB at start (env APP_ALLOCATE_MB)")
	flag.IntVar(&c.exitCode, "exit-at-start", c.exitCode, "exit at once with this code when not 0 (env APP_EXIT_AT_START)")
	flag.Parse()
	return c
}

// allocate holds n MiB, every page written so that it counts against the memory limit.
func allocate(n int) [][]byte {
	chunks := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		chunks = append(chunks, b)
	}
	return chunks
}

var held [][]byte

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	c := parseConfig()
	if c.exitCode != 0 {
		log.Printf("exiting at start with code %d, as asked", c.exitCode)
		os.Exit(c.exitCode)
	}
	if c.allocateMB > 0 {
		log.Printf("allocating %d MiB", c.allocateMB)
		held = allocate(c.allocateMB)
		log.Printf("holding %d MiB", len(held))
	}
	srv := &http.Server{
		Addr:              fmt.Sprintf(":%d", c.port),
		Handler:           newApp(c.commit, c.redisAddr).routes(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("listening on :%d, commit %s, redis %q", c.port, c.commit, c.redisAddr)
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	log.Print("SIGTERM: shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("shutdown: %v", err)
	}
	log.Print("stopped")
}

type app struct {
	commit  string
	counter *counter
}

func newApp(commit, redisAddr string) *app {
	a := &app{commit: commit}
	if redisAddr != "" {
		a.counter = &counter{addr: redisAddr, key: "testapp:visits"}
	}
	return a
}

func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /api/info", a.info)
	mux.HandleFunc("GET /{$}", a.page)
	return a.withCommit(mux)
}

// withCommit sets X-Commit on every answer and logs each request.
func (a *app) withCommit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Commit", a.commit)
		next.ServeHTTP(w, r)
		log.Printf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("User-Agent"))
	})
}

// visit counts one visit; the count is nil when no Redis is configured.
func (a *app) visit(ctx context.Context) (*int64, error) {
	if a.counter == nil {
		return nil, nil
	}
	n, err := a.counter.incr(ctx)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func (a *app) info(w http.ResponseWriter, r *http.Request) {
	n, err := a.visit(r.Context())
	body := map[string]any{"commit": a.commit, "counter": n}
	status := http.StatusOK
	if err != nil {
		body["error"] = err.Error()
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (a *app) page(w http.ResponseWriter, r *http.Request) {
	n, err := a.visit(r.Context())
	visits := "no counter (REDIS_ADDR is not set)"
	switch {
	case err != nil:
		visits = "counter unavailable: " + err.Error()
	case n != nil:
		visits = fmt.Sprintf("visit number %d", *n)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html>\n<title>testapp %s</title>\n<h1>testapp</h1>\n<p>commit <code id=\"commit\">%s</code></p>\n<p id=\"visits\">%s</p>\n",
		html.EscapeString(a.commit), html.EscapeString(a.commit), html.EscapeString(visits))
}
