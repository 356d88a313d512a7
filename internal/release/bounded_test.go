package release

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TestReadNeverHoldsABigMemberOrHead: a 20 MB slot-set member and a 20
// MB queue head are read as they stream: the read allocates a fraction of
// them, keeps their first bytes and their length, and a member of exactly
// MaxMemberBytes is still read whole.
func TestReadNeverHoldsABigMemberOrHead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	big := "\xff<" + strings.Repeat("m", 20<<20)
	edge := strings.Repeat("e", MaxMemberBytes)
	f.slotSet(t, "fat", map[string]float64{big: float64(now - 60_000), edge: float64(now - 60_000), "small": float64(now + 110_000)})
	head := strings.Repeat("h", 20<<20)
	if err := f.admin.RPush(ctx, "queue:mail:fat", "older", head).Err(); err != nil {
		t.Fatal(err)
	}
	topo := topology.New(f.admin, false)

	var h *Holdings
	var err error
	if n := heaptest.Allocated(func() { h, err = Read(ctx, topo, f.family("streams"), "fat", ReadOptions{}) }); n > 4<<20 {
		t.Errorf("reading a set with a 20 MB member allocated %d bytes", n)
	}
	if err != nil || len(h.Keys) != 1 || len(h.Keys[0].Members) != 3 {
		t.Fatalf("read: %v, %+v", err, h)
	}
	byName := map[string]Member{}
	for _, m := range h.Keys[0].Members {
		byName[m.Member] = m
	}
	if m, ok := byName[big[:MaxHeadBytes]]; !ok || !m.Cut || m.Size != int64(len(big)) || m.Tracked {
		t.Errorf("the 20 MB member: found %v, cut %v, %d bytes, tracked %v; want its first %d bytes, cut, of %d bytes", ok, m.Cut, m.Size, m.Tracked, MaxHeadBytes, len(big))
	}
	if m, ok := byName[edge]; !ok || m.Cut || m.Size != MaxMemberBytes {
		t.Errorf("the member of %d bytes is not read whole: found %v, cut %v", MaxMemberBytes, ok, m.Cut)
	}
	if m := byName["small"]; m.Cut || m.Size != 5 {
		t.Errorf("a small member: %+v", m)
	}

	if n := heaptest.Allocated(func() { h, err = Read(ctx, topo, f.family("mail"), "fat", ReadOptions{}) }); n > 4<<20 {
		t.Errorf("reading a queue with a 20 MB head allocated %d bytes", n)
	}
	if err != nil || len(h.Keys) != 1 {
		t.Fatalf("read: %v, %+v", err, h)
	}
	if k := h.Keys[0]; k.Length != 2 || k.Head != head[:MaxHeadBytes] || !k.HeadCut || k.HeadBytes != int64(len(head)) {
		t.Errorf("the queue: length %d, head of %d bytes (cut %v, %d in all); want 2, the first %d bytes of %d", k.Length, len(k.Head), k.HeadCut, k.HeadBytes, MaxHeadBytes, len(head))
	}
}

// TestPreviewKeepsCutMembers: a dead member longer than MaxMemberBytes is
// kept with its reason, never sent by the release, and the audit holds
// none of it; a user whose only dead member is one is refused, saying
// why.
func TestPreviewKeepsCutMembers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	big := strings.Repeat("b", 5<<20)
	key := f.slotSet(t, "fat", map[string]float64{big: float64(now - 60_000), "dead": float64(now - 60_000), "live": float64(now + 110_000)})
	p, err := f.rel.Preview(ctx, req("streams", "fat"))
	if err != nil || p.Refusal != "" || len(p.Keys) != 1 {
		t.Fatalf("preview: %v, refusal %q", err, p.Refusal)
	}
	if rm := p.Keys[0].Remove; len(rm) != 1 || rm[0].Member != "dead" {
		var sizes []int
		for _, m := range rm {
			sizes = append(sizes, len(m.Member))
		}
		t.Errorf("would remove members of %v bytes, want only dead", sizes)
	}
	cut := 0
	for _, m := range p.Keys[0].Keep {
		if m.Cut && len(m.Member) == MaxHeadBytes {
			cut++
		}
	}
	if cut != 1 {
		t.Errorf("the 5 MB member is not kept cut: keep %d members", len(p.Keys[0].Keep))
	}
	if _, err := f.rel.Execute(ctx, p, confirm("page")); err != nil {
		t.Fatal(err)
	}
	if err := f.admin.ZScore(ctx, key, big).Err(); err != nil {
		t.Errorf("the release removed the 5 MB member: %v", err)
	}
	if err := f.admin.ZScore(ctx, key, "dead"); err.Err() != redis.Nil {
		t.Errorf("the small dead member was not removed: %v", err.Err())
	}

	// Only a big member is dead: nothing to release, and why.
	f.slotSet(t, "onlybig", map[string]float64{big: float64(now - 60_000), "live": float64(now + 110_000)})
	p, err = f.rel.Preview(ctx, req("streams", "onlybig"))
	if err != nil || !strings.Contains(p.Refusal, "1 member is longer than 512 bytes") {
		t.Errorf("preview of a user whose only dead member is cut: %v, refusal %q", err, p.Refusal)
	}
	if p, err = f.rel.Preview(ctx, Request{Source: "cli", Operator: "ops-alice", Family: "streams", User: "onlybig", IncludeLive: true}); err != nil || len(p.Keys) != 1 || len(p.Keys[0].Remove) != 1 || p.Keys[0].Remove[0].Member != "live" {
		t.Errorf("with live members included, the big one is not kept: %v, refusal %q", err, p.Refusal)
	}

	b, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 { // preview, intent, outcome, refusal, preview
		t.Fatalf("%d audit lines, want 5", len(lines))
	}
	for _, l := range lines {
		if len(l) > 4<<10 || strings.Contains(l, "bbbb") {
			t.Errorf("an audit line of %d bytes holds the big member: %.300s", len(l), l)
		}
		var rec Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("audit line: %v", err)
		}
	}
}

// TestClusterReadsEachKeyRawFromItsNode: in a cluster, each key is read
// raw from the node that holds it (the master, or a replica when the
// client reads replicas), big members and heads cut; a key whose slot
// moved is said to be moving, and read again once the client has learnt
// the new owner.
func TestClusterReadsEachKeyRawFromItsNode(t *testing.T) {
	f := newFixture(t)
	cl := redistest.StartCluster(t, 3, 1)
	cc := cl.Client()
	ctx := context.Background()
	now := exportertest.RedisTime(t, cc)
	users := []string{"a", "b", "c", "d", "e", "f"}
	big := strings.Repeat("b", 1<<20)
	for _, u := range users {
		if err := cc.ZAdd(ctx, "joishi:streams:{"+u+"}", redis.Z{Score: float64(now - 60_000), Member: big}, redis.Z{Score: float64(now + 110_000), Member: "live-" + u}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cc.RPush(ctx, "queue:mail:"+u, "next-"+u+strings.Repeat("x", 1<<20)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cl.WaitReplicated()
	replicas := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ReadOnly: true, DisableIdentity: true})
	t.Cleanup(func() { _ = replicas.Close() })
	for _, topo := range []*topology.Topology{topology.New(cc, false), topology.New(replicas, true)} {
		for _, u := range users {
			h, err := Read(ctx, topo, f.family("streams"), u, ReadOptions{})
			if err != nil || len(h.Keys) != 1 || h.Keys[0].Problem != "" || len(h.Keys[0].Members) != 2 {
				t.Fatalf("replicas %v, user %s: %v, %+v", topo.ReadsReplicas(), u, err, h)
			}
			if m := h.Keys[0].Members; !m[0].Cut || m[0].Size != int64(len(big)) || m[1].Member != "live-"+u {
				t.Errorf("replicas %v, user %s: members %q (cut %v), %q", topo.ReadsReplicas(), u, m[0].Member[:10], m[0].Cut, m[1].Member)
			}
			h, err = Read(ctx, topo, f.family("mail"), u, ReadOptions{})
			if err != nil || len(h.Keys) != 1 || !strings.HasPrefix(h.Keys[0].Head, "next-"+u) || len(h.Keys[0].Head) != MaxHeadBytes {
				t.Errorf("replicas %v, user %s: %v, %+v", topo.ReadsReplicas(), u, err, h)
			}
		}
	}

	// The slot of a's key moves behind the client's back.
	key := "joishi:streams:{a}"
	slot := topology.HashSlot(key)
	from := cl.SlotOwner(slot)
	if err := cl.MigrateSlot(ctx, slot, from, cl.OtherMaster(from)); err != nil {
		t.Fatal(err)
	}
	topo := topology.New(cc, false)
	h, err := Read(ctx, topo, f.family("streams"), "a", ReadOptions{})
	if err != nil || len(h.Keys) != 1 || !strings.Contains(h.Keys[0].Problem, "moving") {
		t.Fatalf("a key whose slot moved: %v, %+v", err, h)
	}
	exportertest.WaitFor(t, time.Minute, "the key read from its new node", func() bool {
		h, err := Read(ctx, topo, f.family("streams"), "a", ReadOptions{})
		return err == nil && len(h.Keys) == 1 && len(h.Keys[0].Members) == 2
	})
}
