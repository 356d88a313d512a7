package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decoding walks the yaml.Node tree itself rather than letting yaml.v3 fill
// the structs. That is what lets every error carry its field path
// (yaml.v3's KnownFields errors only say "line N: field x not found in type
// config.Family"), and what tells an explicit zero from an absent field.
// It is at least as strict as KnownFields(true): unknown and duplicate keys
// are errors, and scalars must have the right type.

// present records which keys a mapping set to a non-null value.
type present map[string]bool

// presence is what the decoder saw, for defaults and validation.
type presence struct {
	redis    present
	tls      present
	sampling present
	leaks    present
	families []present
}

func errf(path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf(format, args...)
	}
	return fmt.Errorf("%s: "+format, append([]any{path}, args...)...)
}

// decodeYAML parses b into one document node; nil when b holds no document.
func decodeYAML(b []byte) (doc *yaml.Node, err error) {
	// yaml.v3 turns its own failures into errors; anything else escaping it
	// is a bug in the library, and Parse promises not to panic.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("yaml: internal error: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // no effect on a yaml.Node; the walk below is the strict part
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		return nil, errors.New("the file holds more than one YAML document")
	}
	return &n, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 1000; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.AliasNode || // an alias to nothing
		(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's type for "must be a X, not a Y" errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!str":
			return "a string"
		}
		return "a scalar"
	}
	return "nothing"
}

type pair struct {
	key string
	val *yaml.Node
}

// pairs returns a mapping's keys and values, in document order, with merge
// keys (<<) applied: explicit keys win over merged ones, and earlier merged
// mappings win over later ones. Duplicate explicit keys are errors.
func pairs(n *yaml.Node, path string, seen map[*yaml.Node]bool) ([]pair, error) {
	var out, merged []pair
	keys := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, errf(path, "field names must be strings, not %s", describe(k))
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if keys[k.Value] {
			return nil, errf(join(path, k.Value), "defined more than once")
		}
		keys[k.Value] = true
		out = append(out, pair{k.Value, v})
	}
	addFrom := func(m *yaml.Node) error {
		m = resolve(m)
		if m == nil || m.Kind != yaml.MappingNode {
			return errf(path, "<< must merge a mapping or a list of mappings, not %s", describe(m))
		}
		if seen[m] {
			return nil
		}
		seen[m] = true
		ps, err := pairs(m, path, seen)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if !keys[p.key] {
				keys[p.key] = true
				merged = append(merged, p)
			}
		}
		return nil
	}
	for _, m := range merges {
		m = resolve(m)
		if m != nil && m.Kind == yaml.SequenceNode {
			for _, e := range m.Content {
				if err := addFrom(e); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := addFrom(m); err != nil {
			return nil, err
		}
	}
	return append(out, merged...), nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type fieldFunc func(n *yaml.Node, path string) error

// mapping decodes the mapping n field by field. A null value counts as
// absent. unknown, if not nil, gets the first say on keys fields does not
// know.
func mapping(n *yaml.Node, path string, fields map[string]fieldFunc, unknown func(key string) error) (present, error) {
	set := present{}
	n = resolve(n)
	if isNull(n) {
		return set, nil
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			return nil, fmt.Errorf("the file must be a mapping (redis, sampling, leaks, families), not %s", describe(n))
		}
		return nil, errf(path, "must be a mapping, not %s", describe(n))
	}
	ps, err := pairs(n, path, map[*yaml.Node]bool{n: true})
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		f, ok := fields[p.key]
		if !ok {
			if unknown != nil {
				if err := unknown(p.key); err != nil {
					return nil, err
				}
			}
			return nil, unknownField(path, p.key, fields)
		}
		v := resolve(p.val)
		if isNull(v) {
			continue
		}
		if err := f(v, join(path, p.key)); err != nil {
			return nil, err
		}
		set[p.key] = true
	}
	return set, nil
}

// decode fills c from the document node doc (nil: an empty file).
func decode(doc *yaml.Node, c *Config) (*presence, error) {
	p := &presence{redis: present{}, tls: present{}, sampling: present{}, leaks: present{}}
	var root *yaml.Node
	if doc != nil {
		root = doc
		if doc.Kind == yaml.DocumentNode {
			root = nil
			if len(doc.Content) > 0 {
				root = doc.Content[0]
			}
		}
	}
	_, err := mapping(root, "", map[string]fieldFunc{
		"redis": func(n *yaml.Node, path string) (err error) {
			p.redis, p.tls, err = decodeRedis(n, path, &c.Redis)
			return err
		},
		"sampling": func(n *yaml.Node, path string) (err error) {
			p.sampling, err = decodeSampling(n, path, &c.Sampling)
			return err
		},
		"leaks": func(n *yaml.Node, path string) (err error) {
			p.leaks, err = mapping(n, path, map[string]fieldFunc{
				"floor_window":    duration(&c.Leaks.FloorWindow),
				"per_user_series": integer(&c.Leaks.PerUserSeries),
			}, nil)
			return err
		},
		"release": func(n *yaml.Node, path string) (err error) {
			c.Release, err = decodeRelease(n, path)
			return err
		},
		"families": func(n *yaml.Node, path string) error {
			if n.Kind != yaml.SequenceNode {
				return errf(path, "must be a list, not %s", describe(n))
			}
			c.Families = make([]Family, len(n.Content))
			p.families = make([]present, len(n.Content))
			for i, e := range n.Content {
				fp := fmt.Sprintf("%s[%d]", path, i)
				e = resolve(e)
				if isNull(e) || e.Kind != yaml.MappingNode {
					return errf(fp, "must be a mapping, not %s", describe(e))
				}
				set, err := decodeFamily(e, fp, &c.Families[i])
				if err != nil {
					return err
				}
				p.families[i] = set
			}
			return nil
		},
	}, nil)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// errPasswordInConfig follows the field path in the error for a password
// in the config file.
const errPasswordInConfig = "passwords are not accepted in the config file; put it in a file named by redis.password_file, or in the " + PasswordEnv + " environment variable"

func decodeRedis(n *yaml.Node, path string, r *Redis) (set, tlsSet present, err error) {
	tlsSet = present{}
	set, err = mapping(n, path, map[string]fieldFunc{
		"addr":          str(&r.Addr),
		"addrs":         strList(&r.Addrs),
		"mode":          str(&r.Mode),
		"master_name":   str(&r.MasterName),
		"username":      str(&r.Username),
		"password_file": str(&r.PasswordFile),
		"db":            integer(&r.DB),
		"read_from":     str(&r.ReadFrom),
		"dial_timeout":  duration(&r.DialTimeout),
		"tls": func(n *yaml.Node, path string) (err error) {
			t := &TLS{}
			tlsSet, err = mapping(n, path, map[string]fieldFunc{
				"ca_file":              str(&t.CAFile),
				"cert_file":            str(&t.CertFile),
				"key_file":             str(&t.KeyFile),
				"server_name":          str(&t.ServerName),
				"insecure_skip_verify": boolean(&t.InsecureSkipVerify),
			}, nil)
			r.TLS = t
			return err
		},
	}, func(key string) error {
		if strings.EqualFold(key, "password") {
			return errf(join(path, key), "%s", errPasswordInConfig)
		}
		return nil
	})
	return set, tlsSet, err
}

func decodeSampling(n *yaml.Node, path string, s *Sampling) (present, error) {
	return mapping(n, path, map[string]fieldFunc{
		"interval":            duration(&s.Interval),
		"timeout":             duration(&s.Timeout),
		"scan_count":          integer(&s.ScanCount),
		"window":              duration(&s.Window),
		"max_keys_per_second": integer(&s.MaxKeysPerSecond),
		"max_members_per_key": integer(&s.MaxMembersPerKey),
		"discovery":           str(&s.Discovery),
		"full_scan_interval":  duration(&s.FullScanInterval),
		"track_changes":       boolean(&s.TrackChanges),
		"redis_cpu_share":     number(&s.RedisCPUShare),
		"shard":               str(&s.Shard),
	}, nil)
}

func decodeFamily(n *yaml.Node, path string, f *Family) (present, error) {
	return mapping(n, path, map[string]fieldFunc{
		"name":                 str(&f.Name),
		"kind":                 str((*string)(&f.Kind)),
		"match":                str(&f.Match),
		"user":                 str(&f.User),
		"limit":                integer(&f.Limit),
		"ttl":                  duration(&f.TTL),
		"heartbeat_interval":   duration(&f.HeartbeatInterval),
		"max_hold":             duration(&f.MaxHold),
		"stale_after":          duration(&f.StaleAfter),
		"clock_skew_tolerance": duration(&f.ClockSkewTolerance),
		"score_unit":           str(&f.ScoreUnit),
		"score":                str(&f.Score),
		"floor_window":         duration(&f.FloorWindow),
		"window":               duration(&f.Window),
		"max_wait":             duration(&f.MaxWait),
		"pop_side":             str(&f.PopSide),
		"max_deliveries":       integer(&f.MaxDeliveries),
		"prefix":               str(&f.Prefix),
		"queues":               strList(&f.Queues),
		"visibility_timeout":   duration(&f.VisibilityTimeout),
	}, nil)
}
