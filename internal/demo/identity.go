package demo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// identity answers INFO server and INFO commandstats the way Redis does
// for what the exporter reads of them (run_id, FLUSHALL calls). miniredis
// answers neither, and without them the exporter could not tell the
// demo's simulated restart from mass releases, and would warn at start-up
// that it cannot.
type identity struct {
	mu      sync.Mutex
	runID   string
	flushes int
}

func newIdentity() *identity { return &identity{runID: newRunID()} }

func newRunID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (id *identity) serve(mr *miniredis.Miniredis) {
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if !strings.EqualFold(cmd, "INFO") || len(args) != 1 {
			return false
		}
		id.mu.Lock()
		defer id.mu.Unlock()
		switch strings.ToLower(args[0]) {
		case "server":
			c.WriteBulk("# Server\r\nredis_version:7.0.0-miniredis\r\nrun_id:" + id.runID + "\r\n")
		case "commandstats":
			c.WriteBulk(fmt.Sprintf("# Commandstats\r\ncmdstat_flushall:calls=%d,usec=0,usec_per_call=0.00\r\n", id.flushes))
		default:
			return false
		}
		return true
	})
}

// restart is what a Redis restart without persistence looks like: the
// data is gone and the server has a new run_id.
func (id *identity) restart(mr *miniredis.Miniredis) {
	id.mu.Lock()
	id.runID = newRunID()
	id.mu.Unlock()
	mr.FlushAll()
}

// flush is a FLUSHALL, counted as Redis counts it.
func (id *identity) flush(mr *miniredis.Miniredis) {
	id.mu.Lock()
	id.flushes++
	id.mu.Unlock()
	mr.FlushAll()
}
