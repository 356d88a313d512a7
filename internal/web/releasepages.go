package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/release"
)

// maxReason bounds the reason an operator gives.
const maxReason = 1000

type previewPage struct {
	Family, User, Operator, Now string
	Keys                        []previewKey
	Refusal, Rule               string
	ItemName                    string
	Action, PlanID, CSRF        string
	ValueKind, IncludeLive      bool
	Button                      string
	MaxReason                   int
	LiveLink, DefaultLink       string
	UserLink                    string
}

type previewKey struct {
	Shown   string
	Remove  []memberView
	Keep    []memberView
	Value   string
	NoLease bool
}

// operator is who makes a release: the basic-auth user that
// exporter-toolkit checked. The web config file is read again, so that
// removing its users while the exporter runs (which turns the toolkit's
// check off) turns releases off too, rather than trusting any name sent.
func (h *Handler) operator(r *http.Request) (string, error) {
	if err := authUsers(h.o.WebConfigFile); err != nil {
		return "", err
	}
	user, _, ok := r.BasicAuth()
	if !ok || user == "" {
		return "", errors.New("no authenticated operator")
	}
	return user, nil
}

func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	f, ok := h.family(w, r)
	if !ok {
		return
	}
	user := r.PathValue("user")
	req := release.Request{Source: "web", RemoteAddr: r.RemoteAddr, Family: f.Name, User: user,
		IncludeLive: r.URL.Query().Get("live") == "1"}
	op, err := h.operator(r)
	if err != nil {
		_ = h.o.Releaser.Refuse(release.ActionPreview, req, err.Error())
		h.fail(w, http.StatusForbidden, "release refused: "+err.Error(), userLink(f.Name, user))
		return
	}
	req.Operator = op
	if !h.allowLive(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), liveReadTimeout)
	defer cancel()
	plan, err := h.o.Releaser.Preview(ctx, req)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, release.ErrRefused) {
			status = http.StatusForbidden
		}
		h.fail(w, status, "preview failed: "+err.Error(), userLink(f.Name, user))
		return
	}
	page := previewPage{
		Family: f.Name, User: shown(user), Operator: shown(op),
		Refusal: plan.Refusal, IncludeLive: plan.IncludeLive, MaxReason: maxReason,
		Action:   userLink(f.Name, user) + "/release",
		UserLink: userLink(f.Name, user), ItemName: "Member",
	}
	if plan.Now != 0 {
		// A kind that is not released is not read: no time to show.
		page.Now = timeOfMs(plan.Now)
	}
	page.LiveLink = userLink(f.Name, user) + "/preview?live=1"
	page.DefaultLink = userLink(f.Name, user) + "/preview"
	removed := 0
	for _, k := range plan.Keys {
		pk := previewKey{Shown: shown(k.Key), NoLease: k.NoLease}
		for i := range k.Remove {
			pk.Remove = append(pk.Remove, memberViewOf(f, plan.Now, &k.Remove[i]))
		}
		for i := range k.Keep {
			pk.Keep = append(pk.Keep, memberViewOf(f, plan.Now, &k.Keep[i]))
		}
		removed += len(k.Remove)
		if f.Kind == config.KindCounter || f.Kind == config.KindRateLimit {
			pk.Value = shown(k.Value)
		}
		page.Keys = append(page.Keys, pk)
	}
	switch f.Kind {
	case config.KindLock:
		page.ItemName = "Token"
		page.Rule = "The lock is deleted only if it still holds this token when you confirm (a token-checked delete, as its holder would do)."
		page.Button = "Delete the lock"
	case config.KindCounter, config.KindRateLimit:
		page.ValueKind = true
		page.Rule = "The value is set to the new value only if it is still the value shown when you confirm (compare-and-set, keeping the key's TTL)."
		page.Button = "Set the value"
		page.LiveLink = ""
	default:
		page.Rule = "Each member is removed only if its score is still the one shown when you confirm: a member refreshed by a heartbeat in between is alive and stays."
		page.Button = fmt.Sprintf("Release %d member(s)", removed)
	}
	if plan.Refusal == "" {
		id, token, err := h.plans.put(plan)
		if err != nil {
			h.fail(w, http.StatusInternalServerError, "cannot keep the preview: "+err.Error(), "")
			return
		}
		page.PlanID, page.CSRF = id, token
	}
	h.render(w, http.StatusOK, "preview", "Release preview",
		[]crumb{{Text: "Leaks", Href: "/leaks"}, {Text: f.Name, Href: "/leaks#family-" + f.Name},
			{Text: shown(user), Href: userLink(f.Name, user)}, {Text: "Release preview"}}, page)
}

type resultPage struct {
	Family, User, Result, Summary, Reason, UserLink string
	Items                                           []resultItem
	// Audited: the attempt's outcome record is in the audit file.
	Audited bool
}

type resultItem struct {
	Key, Item, State, Outcome, Now string
}

func (h *Handler) release(w http.ResponseWriter, r *http.Request) {
	fam, user := r.PathValue("family"), r.PathValue("user")
	back := userLink(fam, user) + "/preview"
	req := release.Request{Source: "web", RemoteAddr: r.RemoteAddr, Family: fam, User: user}
	refuse := func(status int, why string) {
		_ = h.o.Releaser.Refuse(release.ActionRelease, req, why)
		h.fail(w, status, "release refused: "+why, back)
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "unreadable form: "+err.Error())
		return
	}
	op, err := h.operator(r)
	if err != nil {
		refuse(http.StatusForbidden, err.Error())
		return
	}
	req.Operator = op
	id := r.PostForm.Get("plan")
	if err := h.plans.check(r.PostForm.Get("csrf"), op, fam, user, id); err != nil {
		refuse(http.StatusForbidden, err.Error())
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	switch {
	case reason == "":
		refuse(http.StatusBadRequest, "a reason is required")
		return
	case len(reason) > maxReason:
		refuse(http.StatusBadRequest, fmt.Sprintf("the reason is longer than %d bytes", maxReason))
		return
	}
	var newValue int64
	if v := strings.TrimSpace(r.PostForm.Get("value")); v != "" {
		if newValue, err = strconv.ParseInt(v, 10, 64); err != nil {
			refuse(http.StatusBadRequest, fmt.Sprintf("the new value %q is not an integer", shown(v)))
			return
		}
	}
	plan := h.plans.take(id)
	if plan == nil {
		refuse(http.StatusConflict, "this preview was already used or has expired; preview again")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), liveReadTimeout)
	defer cancel()
	out, err := h.o.Releaser.Execute(ctx, plan, release.Confirm{Operator: op, RemoteAddr: r.RemoteAddr, Reason: reason, NewValue: newValue})
	if errors.Is(err, release.ErrRefused) {
		h.fail(w, http.StatusForbidden, "release refused: "+err.Error(), back)
		return
	}
	page := resultPage{Family: fam, User: shown(user), Result: out.Result, Reason: reason, UserLink: userLink(fam, user), Audited: out.Audited}
	for _, it := range out.Items {
		item := it.Member
		if item == "" {
			item = it.Value + " → " + it.NewValue
		}
		page.Items = append(page.Items, resultItem{Key: shown(it.Key), Item: shown(item), State: it.State, Outcome: it.Outcome, Now: shown(it.Now)})
	}
	status := http.StatusOK
	page.Summary = fmt.Sprintf("%d removed or set, %d kept because they changed since the preview, %d already gone.", out.Removed, out.Kept, out.Gone)
	if out.Unanswered > 0 {
		page.Summary += fmt.Sprintf(" %d sent without an answer from Redis: they may have been removed or set; preview again to see.", out.Unanswered)
	}
	switch {
	case err != nil && out.Result == release.ResultReleased:
		// The scripts ran; only the outcome record is missing.
		status = http.StatusInternalServerError
		page.Summary = "Released, but not fully audited: " + err.Error() + ". " + page.Summary
	case err != nil:
		status = http.StatusBadGateway
		page.Summary = "The release failed: " + err.Error() + ". " + page.Summary
	}
	h.render(w, status, "result", "Release "+out.Result,
		[]crumb{{Text: "Leaks", Href: "/leaks"}, {Text: fam, Href: "/leaks#family-" + fam},
			{Text: shown(user), Href: userLink(fam, user)}, {Text: "Release"}}, page)
}
