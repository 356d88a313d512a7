package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// promAPI talks to the test's Prometheus over its HTTP API.
type promAPI struct{ base string }

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// get calls a /api/v1 endpoint and decodes its data field into out.
func (p promAPI) get(path string, q url.Values, out any) error {
	code, body, err := httpGet(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return fmt.Errorf("%s: HTTP %d, not JSON: %.300s", path, code, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: HTTP %d, %s: %s", path, code, r.ErrorType, r.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// query runs an instant query at now and returns its series. A scalar or
// string result counts as one series.
func (p promAPI) query(expr string) ([]promSample, error) {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	q := url.Values{"query": {expr}, "time": {strconv.FormatInt(time.Now().Unix(), 10)}}
	if err := p.get("/api/v1/query", q, &d); err != nil {
		return nil, err
	}
	switch d.ResultType {
	case "vector":
		var v []promSample
		err := json.Unmarshal(d.Result, &v)
		return v, err
	case "matrix":
		var m []struct {
			Metric map[string]string `json:"metric"`
		}
		err := json.Unmarshal(d.Result, &m)
		out := make([]promSample, len(m))
		for i := range m {
			out[i].Metric = m[i].Metric
		}
		return out, err
	default:
		var v [2]any
		err := json.Unmarshal(d.Result, &v)
		return []promSample{{Value: v}}, err
	}
}

// labelValues is Grafana's label_values(selector, label): the values of
// label on the series matching selector over the last five minutes, sorted.
// An empty selector means every series.
func (p promAPI) labelValues(selector, label string) ([]string, error) {
	now := time.Now()
	q := url.Values{
		"start": {strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10)},
		"end":   {strconv.FormatInt(now.Unix(), 10)},
	}
	if selector != "" {
		q.Set("match[]", selector)
	}
	var vals []string
	if err := p.get("/api/v1/label/"+url.PathEscape(label)+"/values", q, &vals); err != nil {
		return nil, err
	}
	slices.Sort(vals)
	return vals, nil
}

// raw returns an endpoint's body as text, for the failure report.
func (p promAPI) raw(path string, limit int) string {
	code, body, err := httpGet(p.base + path)
	if err != nil {
		return fmt.Sprintf("GET %s: %v", path, err)
	}
	if len(body) > limit {
		body = body[:limit] + "[...]"
	}
	return fmt.Sprintf("GET %s: HTTP %d\n%s", path, code, body)
}
