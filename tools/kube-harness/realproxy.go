// realproxy.go forwards TCP from the host's end of the node link to the apiserver on loopback:
// the node's processes and its pods (through the kubernetes Service) reach the API there, while
// the apiserver itself stays bound to 127.0.0.1 as in the fast tier. TLS passes through untouched.
package main

import (
	"io"
	"net"
	"sync"
)

type apiProxy struct {
	addr string
	l    net.Listener
	wg   sync.WaitGroup
}

func startAPIProxy(listen, target string) (*apiProxy, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &apiProxy{addr: l.Addr().String(), l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.forward(c, target)
		}
	}()
	return p, nil
}

func (p *apiProxy) forward(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (p *apiProxy) close() { _ = p.l.Close() }
