package lint

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// RuleFile is a Prometheus rule file. Decoding is strict: a misspelt key
// (annotation:, label:) is an error, as it is for Prometheus.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Limit    int    `yaml:"limit,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is an alerting or a recording rule.
type Rule struct {
	Record        string            `yaml:"record,omitempty"`
	Alert         string            `yaml:"alert,omitempty"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// Name is the alert or record name.
func (r Rule) Name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// ParseRuleFile decodes a rule file strictly.
func ParseRuleFile(b []byte) (*RuleFile, error) {
	var rf RuleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("rule file: %w", err)
	}
	return &rf, nil
}

// Alerts returns the alerting rules in file order.
func (rf *RuleFile) Alerts() []Rule { return rf.rules(func(r *Rule) bool { return r.Alert != "" }) }

// Records returns the recording rules in file order.
func (rf *RuleFile) Records() []Rule { return rf.rules(func(r *Rule) bool { return r.Record != "" }) }

// rules returns the rules that keep accepts, in file order.
func (rf *RuleFile) rules(keep func(*Rule) bool) []Rule {
	var out []Rule
	for _, g := range rf.Groups {
		for i := range g.Rules {
			if keep(&g.Rules[i]) {
				out = append(out, g.Rules[i])
			}
		}
	}
	return out
}

// Load reads the rule file at path and builds the checker of its rules.
func Load(path string) (*RuleFile, *Checker, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	rf, err := ParseRuleFile(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	c, err := NewChecker(rf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return rf, c, nil
}
