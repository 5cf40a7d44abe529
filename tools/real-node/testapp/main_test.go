package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCommitFrom(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"APP_COMMIT": "c2", "SANDCASTLE_SHA": "abc"}, "c2"},
		{map[string]string{"SANDCASTLE_SHA": "abc"}, "abc"},
		{map[string]string{}, "built"},
	} {
		if got := commitFrom(env(c.env), "built"); got != c.want {
			t.Errorf("%v: %s, want %s", c.env, got, c.want)
		}
	}
}

func TestParseInteger(t *testing.T) {
	if n, err := parseInteger(":42\r\n"); err != nil || n != 42 {
		t.Errorf(":42 → %d, %v", n, err)
	}
	if _, err := parseInteger("-ERR wrong type\r\n"); err == nil || !strings.Contains(err.Error(), "wrong type") {
		t.Errorf("error reply → %v", err)
	}
	if _, err := parseInteger("+OK\r\n"); err == nil {
		t.Error("a status reply is not a count")
	}
	if got := string(command("INCR", "k")); got != "*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n" {
		t.Errorf("command %q", got)
	}
}

// fakeRedis answers every INCR with the next number.
func fakeRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for range 5 { // *2, $4, INCR, $len, key
				if _, err := r.ReadString('\n'); err != nil {
					break
				}
			}
			fmt.Fprintf(c, ":%d\r\n", n.Add(1))
			c.Close()
		}
	}()
	return l.Addr().String()
}

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// Every answer names the commit; /api/info counts visits in Redis, /healthz does not.
func TestRoutes(t *testing.T) {
	h := newApp("c1", fakeRedis(t)).routes()
	for i := int64(1); i <= 2; i++ {
		rec := get(t, h, "/api/info")
		var body struct {
			Commit  string `json:"commit"`
			Counter *int64 `json:"counter"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != 200 || rec.Header().Get("X-Commit") != "c1" || body.Commit != "c1" || body.Counter == nil || *body.Counter != i {
			t.Errorf("visit %d: %d %v %+v", i, rec.Code, rec.Header(), body)
		}
	}
	if rec := get(t, h, "/healthz"); rec.Code != 200 || rec.Header().Get("X-Commit") != "c1" {
		t.Errorf("/healthz: %d %v", rec.Code, rec.Header())
	}
	if rec := get(t, h, "/"); !strings.Contains(rec.Body.String(), `<code id="commit">c1</code>`) || !strings.Contains(rec.Body.String(), "visit number 3") {
		t.Errorf("page: %s", rec.Body.String())
	}
	if rec := get(t, h, "/nope"); rec.Code != 404 {
		t.Errorf("/nope: %d", rec.Code)
	}
}

// Without Redis the counter is null; with Redis unreachable the answer is 503 and says why.
func TestCounterAbsentOrDown(t *testing.T) {
	if rec := get(t, newApp("c1", "").routes(), "/api/info"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"counter":null`) {
		t.Errorf("no redis: %d %s", rec.Code, rec.Body.String())
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if rec := get(t, newApp("c1", addr).routes(), "/api/info"); rec.Code != 503 || !strings.Contains(rec.Body.String(), "redis "+addr) {
		t.Errorf("redis down: %d %s", rec.Code, rec.Body.String())
	}
}
