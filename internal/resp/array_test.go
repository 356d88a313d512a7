package resp

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// TestReadArrayHead: an array's head says how many elements follow, each
// then read on its own (a value longer than the reader's buffer
// streamed, a nil one told apart); a nil array has none, an error reply
// is returned as such, and anything else is a protocol error.
func TestReadArrayHead(t *testing.T) {
	long := strings.Repeat("v", 100<<10)
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	go func() {
		_, _ = server.Write([]byte("*3\r\n$3\r\nabc\r\n$-1\r\n$102400\r\n" + long + "\r\n*-1\r\n*0\r\n-WRONGTYPE no\r\n:1\r\n"))
		_ = server.Close()
	}()
	c := NewConn(client, 10*time.Second)
	n, errMsg, err := c.ReadArrayHead()
	if n != 3 || errMsg != nil || err != nil {
		t.Fatalf("*3: %d, %q, %v", n, errMsg, err)
	}
	for i, want := range []string{"abc", "", long} {
		var w bytes.Buffer
		none, errMsg, err := c.ReadBulkTo(&w)
		if err != nil || errMsg != nil || none != (i == 1) || w.String() != want {
			t.Fatalf("element %d: nil %v, %q, %v, %d bytes", i, none, errMsg, err, w.Len())
		}
	}
	for _, want := range []int{0, 0} {
		if n, errMsg, err := c.ReadArrayHead(); n != want || errMsg != nil || err != nil {
			t.Errorf("an empty or nil array: %d, %q, %v", n, errMsg, err)
		}
	}
	if _, errMsg, err := c.ReadArrayHead(); string(errMsg) != "WRONGTYPE no" || err != nil {
		t.Errorf("an error reply: %q, %v", errMsg, err)
	}
	if _, _, err := c.ReadArrayHead(); err == nil || !c.broken {
		t.Errorf("an integer reply: %v, broken %v", err, c.broken)
	}
}
