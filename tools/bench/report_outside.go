package main

import (
	"fmt"
	"strings"
)

// outsideTargets are the outside measurement, each a row of the
// Targets table.
func (rep *report) outsideTargets(p func(string, ...any)) {
	x := rep.Outside
	if x == nil {
		return
	}
	what := fmt.Sprintf("outside measurement: %d slot sets, the application writing %d sets/s and timing a GET/SET every ms; the exporter binary with its defaults, %.0f s with it, after its first read, against %.0f s without it before and after (their mean)", x.Sets, x.Rate, x.Phase, x.Phase)
	if !x.Ran {
		p("| %s | not run: %s | **missed** |\n", what, x.Err)
		return
	}
	verdict := func(ok bool, miss string) string {
		if ok {
			return "met"
		}
		return "**missed**: " + miss
	}
	alone := x.alone()
	share := x.With.RedisCPU - alone.RedisCPU
	p("| %s: Redis CPU <= +10%% of a core | %.1f%% → %.1f%%: %+.1f%% of a core | %s |\n", what, alone.RedisCPU*100, x.With.RedisCPU*100, share*100,
		verdict(share <= 0.10, fmt.Sprintf("%.1f points over; the exporter read %.0f keys/s", (share-0.10)*100, x.KeysRead)))
	rise := x.With.P99 - alone.P99
	p("| outside measurement: the application's p99 <= +0.5 ms | %.2f → %.2f ms: %+.2f ms | %s |\n", alone.P99, x.With.P99, rise,
		verdict(rise <= 0.5, fmt.Sprintf("%.2f ms over", rise-0.5)))
	p("| outside measurement: the exporter's live heap <= 150 MB and RSS <= 300 MB (largest sampled, every second, after the first read; during it: %s / %s) | %s / %s | %s |\n",
		mb(x.FirstHeap), mb(x.FirstRSS), mb(x.Heap), mb(x.RSS),
		verdict(x.Heap <= 150e6 && x.RSS <= 300e6, memoryOver(x.Heap, x.RSS)))
}

func (rep *report) outsideSection(p func(string, ...any)) {
	x := rep.Outside
	if x == nil {
		return
	}
	p("## Outside measurement: the binary, its defaults, beside an application\n\n")
	if !x.Ran {
		p("Not run: %s.\n\n", x.Err)
		return
	}
	p("%d slot sets on a fresh server. The application, a process of its own, writes %d sets a second (`ZADD key <now + ttl> hb` on random sets, batches of 100) while it sends a GET or SET every millisecond on a connection of its own (DB 1). First %.0f s of the application alone; then the exporter binary starts, built from this tree and run with a config file that names Redis and the family and sets nothing else (track_changes on, the pace at a tenth of a core, sampling.interval and timeout at their defaults), in a process of its own; once it exposes `slot_sets` (its first complete picture; the application writes all along, without its probe, and Redis's CPU over the first read is set against %.0f s of the same writes alone just before) another %.0f s are measured; then the exporter stops (SIGTERM) and the application runs alone for as long again. The exporter's share is Redis's CPU with it less the mean of the two phases without it, which brackets the phase with it: on this machine Redis has run the same application at 10.0%% of a core in one run and 13.8%% in the next, so one phase without it measures the machine's drift as much as the exporter. Everything is read from outside: redis-server's and the exporter's CPU from /proc, the exporter's RSS from /proc and its live heap from its own `go_gc_heap_live_bytes`, both sampled every second, and the probe's p99.\n\n",
		x.Sets, x.Rate, x.Phase, writerAlonePhase.Seconds(), x.Phase)
	p("| | application alone, before | with the exporter | application alone, after |\n|---|---:|---:|---:|\n")
	p("| redis-server CPU, share of a core | %.1f%% | %.1f%% | %.1f%% |\n", x.Alone.RedisCPU*100, x.With.RedisCPU*100, x.AloneAfter.RedisCPU*100)
	p("| the probe's p99 | %.2f ms | %.2f ms | %.2f ms |\n", x.Alone.P99, x.With.P99, x.AloneAfter.P99)
	p("| sets written (ZADD, as Redis counted) | %d | %d | %d |\n", x.Alone.Written, x.With.Written, x.AloneAfter.Written)
	p("| keys the exporter read a second (PTTL calls) | - | %.0f | - |\n", x.KeysRead)
	p("| the exporter's own CPU, share of a core | - | %.1f%% | - |\n", x.ExporterCPU*100)
	p("| the exporter's live heap, largest | - | %s (first read: %s) | - |\n", mb(x.Heap), mb(x.FirstHeap))
	p("| the exporter's RSS, largest | - | %s (first read: %s) | - |\n", mb(x.RSS), mb(x.FirstRSS))
	p("| first complete picture, from the exporter's start | - | %s | - |\n", secs(x.FirstRead))
	p("| redis-server CPU during the first read (the writes alone, no probe, just before) | %.1f%% | %.1f%%: %+.1f%% of a core | - |\n\n", x.WriterAlone*100, x.FirstRedisCPU*100, (x.FirstRedisCPU-x.WriterAlone)*100)
}

// memoryOver says which of the outside measurement's memory goals was
// missed, and by how much.
func memoryOver(heap, rss uint64) string {
	var over []string
	if heap > 150e6 {
		over = append(over, fmt.Sprintf("the heap %.1f MB over (what it holds: the change-driven live heap row)", float64(heap)/1e6-150))
	}
	if rss > 300e6 {
		over = append(over, fmt.Sprintf("RSS %.1f MB over", float64(rss)/1e6-300))
	}
	return strings.Join(over, "; ")
}
