package resp_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// TestCappedKeepsTheStartOfABigBulk: a reply far longer than the cap and
// than the reader's buffer is read to its end (the connection stays
// usable), its first bytes kept and its length counted; a short one is
// kept whole.
func TestCappedKeepsTheStartOfABigBulk(t *testing.T) {
	srv := redistest.Start(t)
	cl := srv.Client()
	ctx := context.Background()
	big := "<" + strings.Repeat("x", 3<<20) + ">"
	if err := cl.RPush(ctx, "q", big, "short").Err(); err != nil {
		t.Fatal(err)
	}
	c, err := resp.Dial(ctx, cl, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := resp.NewCapped(10)
	c.Queue("LINDEX", "q", "0")
	c.Queue("LINDEX", "q", "1")
	c.Queue("LINDEX", "q", "2")
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		kept string
		n    int64
		cut  bool
	}{{big[:10], int64(len(big)), true}, {"short", 5, false}} {
		w.Reset()
		none, errMsg, err := c.ReadBulkTo(w)
		if err != nil || errMsg != nil || none {
			t.Fatalf("LINDEX %d: nil %v, error reply %q, %v", i, none, errMsg, err)
		}
		if !bytes.Equal(w.Kept(), []byte(want.kept)) || w.Len() != want.n || w.Cut() != want.cut {
			t.Errorf("LINDEX %d: kept %q of %d bytes (cut %v), want %q of %d (cut %v)", i, w.Kept(), w.Len(), w.Cut(), want.kept, want.n, want.cut)
		}
		if cap(w.Kept()) > 10 {
			t.Errorf("LINDEX %d: the writer grew to %d bytes past its cap of 10", i, cap(w.Kept()))
		}
	}
	if none, _, err := c.ReadBulkTo(w); err != nil || !none {
		t.Errorf("LINDEX past the end: nil %v, %v; the stream lost its place", none, err)
	}
}
