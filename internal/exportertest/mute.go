package exportertest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// MuteProxy passes connections through to a server, until Mute: from then
// on what the server answers is dropped, while what clients send still
// reaches it. A client then waits out its deadline for an answer to a
// command the server carried out, as over a connection lost after the
// request went out.
type MuteProxy struct {
	Addr  string
	muted atomic.Bool
}

// Mute drops every answer from now on.
func (p *MuteProxy) Mute() { p.muted.Store(true) }

// StartMuteProxy listens on a free loopback port and passes each
// connection through to target; everything ends with the test.
func StartMuteProxy(t testing.TB, target string) *MuteProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &MuteProxy{Addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c ...net.Conn) {
		mu.Lock()
		conns = append(conns, c...)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			track(c, s)
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(s, c)
				s.Close()
			}()
			go func() {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && !p.muted.Load() {
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return p
}
