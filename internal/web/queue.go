package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
)

// The user page of a queue framework's family is its queue's page: what
// the latest sweep found, not a live read (the sweep reads every active
// job's lock and hash, more than a page should per click), with the
// orphaned jobs listed and the framework's own recovery named. The release
// button stays off: requeueing a job is the framework's decision.

type queuePage struct {
	Family, Kind, Queue string
	Now                 string
	Found               bool
	States              []stateCount
	Orphans             []orphanView
	OrphansCut          bool
	Sweep               string
	Recovery            string
}

type stateCount struct {
	State string
	N     int64
}

type orphanView struct {
	ID, Name, Age, Started string
	Attempts               int64
}

func (h *Handler) queue(w http.ResponseWriter, f *config.Family, queue string) {
	page := queuePage{Family: f.Name, Kind: string(f.Kind), Queue: shown(queue), Sweep: h.sweepOfUser(f.Name, queue)}
	var v kind.QueueView
	if h.o.Queue != nil {
		v, page.Found = h.o.Queue(f.Name, queue)
	}
	page.Recovery = v.Recovery
	if v.Now > 0 {
		page.Now = timeOfMs(v.Now)
	}
	if page.Found {
		for s, name := range kind.JobStateNames() {
			page.States = append(page.States, stateCount{State: name, N: v.Jobs[s]})
		}
		orphans := slices.Clone(v.Orphans)
		slices.SortStableFunc(orphans, func(a, b kind.Job) int { return cmp.Compare(a.Started, b.Started) })
		for _, j := range orphans {
			o := orphanView{ID: shown(j.ID), Name: shown(j.Name), Attempts: j.Attempts, Age: "unknown", Started: "unknown"}
			if j.Started >= 0 {
				o.Started = timeOfMs(j.Started)
				o.Age = fmtDuration(time.Duration(max(v.Now-j.Started, 0)) * time.Millisecond)
			}
			page.Orphans = append(page.Orphans, o)
		}
		page.OrphansCut = int64(len(v.Orphans)) < v.Jobs[kind.JobOrphaned]
	}
	h.render(w, http.StatusOK, "queue", fmt.Sprintf("%s: queue %s", f.Name, shown(queue)),
		[]crumb{{Text: "Leaks", Href: "/leaks"}, {Text: f.Name, Href: "/leaks#family-" + f.Name}, {Text: shown(queue)}}, page)
}
