package config

import (
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// The decoders of single fields, and the unknown-field error with its
// did-you-mean hint.

func unknownField(path, key string, fields map[string]fieldFunc) error {
	msg := fmt.Sprintf("unknown field %q", key)
	best, bestD := "", 3 // suggest only close misspellings
	for name := range fields {
		if d := editDistance(key, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return errf(path, "%s", msg)
}

// editDistance is the Levenshtein distance, capped for long inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func str(dst *string) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return errf(path, "must be a string, not %s", describe(n))
		}
		*dst = n.Value
		return nil
	}
}

func strList(dst *[]string) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.SequenceNode {
			return errf(path, "must be a list, not %s", describe(n))
		}
		out := make([]string, 0, len(n.Content))
		for i, e := range n.Content {
			e = resolve(e)
			if isNull(e) || e.Kind != yaml.ScalarNode {
				return errf(fmt.Sprintf("%s[%d]", path, i), "must be a string, not %s", describe(e))
			}
			out = append(out, e.Value)
		}
		*dst = out
		return nil
	}
}

func integer(dst *int) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return errf(path, "must be an integer, not %s", describe(n))
		}
		var v int
		if n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			return errf(path, "invalid integer %q", n.Value)
		}
		*dst = v
		return nil
	}
}

func number(dst *float64) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return errf(path, "must be a number, not %s", describe(n))
		}
		var v float64
		if (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&v) != nil {
			return errf(path, "invalid number %q", n.Value)
		}
		*dst = v
		return nil
	}
}

func boolean(dst *bool) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return errf(path, "must be true or false, not %s", describe(n))
		}
		var v bool
		if n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
			return errf(path, "invalid boolean %q (want true or false)", n.Value)
		}
		*dst = v
		return nil
	}
}

func duration(dst *time.Duration) fieldFunc {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return errf(path, "must be a duration such as \"5s\", not %s", describe(n))
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			return errf(path, "invalid duration %s", strconv.Quote(n.Value))
		}
		*dst = d
		return nil
	}
}
