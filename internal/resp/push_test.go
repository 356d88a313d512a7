package resp

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadPush feeds a subscribed connection's replies as Redis writes
// them: an invalidation's names must come out whole and in order, with
// a name longer than the reader's buffer, an empty one and a null
// skipped; a flush (no list), a pong's token and what the feed ignores
// (a subscribe confirmation, an error, a plain reply) must leave the
// connection at the next reply.
func TestReadPush(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	stream := "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*4\r\n$6\r\nslot:a\r\n$0\r\n\r\n$-1\r\n$" +
		"204800\r\n" + long + "\r\n" +
		"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n" +
		"-ERR nope\r\n" +
		"+OK\r\n" +
		"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*-1\r\n" +
		"*2\r\n$4\r\npong\r\n$2\r\nb7\r\n" +
		"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n:5\r\n$6\r\nslot:b\r\n"
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	go func() {
		_, _ = server.Write([]byte(stream))
		_ = server.Close()
	}()
	c := NewConn(client, 10*time.Second)
	var got []string
	each := func(b []byte) { got = append(got, string(b)) }
	want := []struct {
		p     Push
		names []string
	}{
		{Push{Kind: "message", Len: 3, List: true}, []string{"slot:a", "", long}},
		{Push{Kind: "subscribe", Arg: "__redis__:invalidate", Len: 3}, nil},
		{Push{}, nil},
		{Push{}, nil},
		{Push{Kind: "message", Len: 3}, nil},
		{Push{Kind: "pong", Arg: "b7", Len: 2}, nil},
		{Push{Kind: "message", Len: 3, List: true}, []string{"slot:b"}},
	}
	for i, w := range want {
		got = nil
		p, err := c.ReadPush(each)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if p != w.p || !slices.Equal(got, w.names) {
			t.Errorf("reply %d: %+v with %d names, want %+v with %d", i, p, len(got), w.p, len(w.names))
		}
	}
	if _, err := c.ReadPush(each); err == nil {
		t.Error("read past the end of the stream without an error")
	}
}

// TestValue: bulk strings through Value, which shares ReadPush's bulk
// reading: empty is "", null is nil, and one longer than the reader's
// buffer is whole.
func TestValue(t *testing.T) {
	long := strings.Repeat("v", 100<<10)
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	go func() {
		_, _ = server.Write([]byte("$0\r\n\r\n$-1\r\n*2\r\n$3\r\nabc\r\n$102400\r\n" + long + "\r\n"))
		_ = server.Close()
	}()
	c := NewConn(client, 10*time.Second)
	for i, want := range []any{"", nil, []any{"abc", long}} {
		v, err := c.Value()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		switch w := want.(type) {
		case []any:
			got, ok := v.([]any)
			if !ok || len(got) != 2 || got[0] != w[0] || got[1] != w[1] {
				t.Errorf("reply %d: %T of %d, want the array [abc, %d bytes]", i, v, len(got), len(long))
			}
		default:
			if v != want {
				t.Errorf("reply %d: %#v, want %#v", i, v, want)
			}
		}
	}
}
