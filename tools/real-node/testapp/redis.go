// redis.go is the one Redis command the app needs (INCR), spoken in RESP over a fresh
// connection each time: no client library.
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

type counter struct {
	addr string
	key  string
}

// incr increments the counter and returns its new value.
func (c *counter) incr(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return 0, fmt.Errorf("redis %s: %w", c.addr, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write(command("INCR", c.key)); err != nil {
		return 0, fmt.Errorf("redis %s: %w", c.addr, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("redis %s: %w", c.addr, err)
	}
	return parseInteger(line)
}

// command encodes a command as a RESP array of bulk strings.
func command(args ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

// parseInteger reads a RESP integer reply (":42\r\n"); an error reply ("-ERR ...") is an error.
func parseInteger(line string) (int64, error) {
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, ":"):
		return strconv.ParseInt(line[1:], 10, 64)
	case strings.HasPrefix(line, "-"):
		return 0, fmt.Errorf("redis: %s", line[1:])
	default:
		return 0, fmt.Errorf("redis: unexpected reply %q", line)
	}
}
