package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Overrides are the settings given outside the config file, by flags and
// environment variables; they win over the file's (flag > env > file), and
// without a file they are the whole config.
type Overrides struct {
	// Addr, Username and PasswordFile fill redis.addr, redis.username and
	// redis.password_file (REDIS_ADDR, REDIS_USER, REDIS_PASSWORD_FILE).
	Addr, Username, PasswordFile string
	// Families are --family values, name=kind:pattern[,field=value...];
	// given, they replace the file's families.
	Families []string
}

// Empty reports whether o changes nothing.
func (o Overrides) Empty() bool {
	return o.Addr == "" && o.Username == "" && o.PasswordFile == "" && len(o.Families) == 0
}

// FamilyDefaults are the fields a --family of each kind gets unless it
// sets them: the limit of slot sets and counters is out of reach (no
// at-limit or over-limit signal) until limit=N says what the cap is.
var FamilyDefaults = map[Kind][]string{
	KindSlotSet:   {"limit=1000000", "ttl=2m", "heartbeat_interval=20s", "max_hold=1h"},
	KindCounter:   {"limit=1000000"},
	KindRateLimit: {"window=1m"},
	KindLock:      {"ttl=30s", "max_hold=10m"},
	KindList:      {"max_wait=5m"},
	KindStream:    {"max_hold=5m"},
}

const familyForm = "want name=kind:pattern[,field=value...], e.g. 'streams=slotset:joishi:streams:*,limit=3', or for a queue framework name=kind[:prefix][,field=value...], e.g. 'jobs=bullmq:bull,queues=mail'"

var fieldName = regexp.MustCompile(`^[a-z_]+$`)

// ParseFamilyFlag turns one --family value into a family's fields. A queue
// framework's kind finds its keys under its prefix and takes no pattern:
// what follows its colon, if anything, is the prefix, and each
// queues=NAME adds a queue to its list.
func ParseFamilyFlag(v string) (map[string]any, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("--family %q: %s", v, familyForm)
	}
	kind, after, sep := rest, "", byte(0)
	if i := strings.IndexAny(rest, ":,"); i >= 0 {
		kind, sep, after = rest[:i], rest[i], rest[i+1:]
	}
	k := Kind(kind)
	if kind == "" {
		return nil, fmt.Errorf("--family %q: %s", v, familyForm)
	}
	if !slices.Contains(Kinds, k) {
		return nil, fmt.Errorf("--family %q: unknown kind %q (%s)", v, kind, kindList())
	}
	f := map[string]any{"name": name, "kind": kind}
	var opts []string
	switch {
	case k.Framework():
		opts = strings.Split(after, ",")
		if sep == ':' && opts[0] != "" {
			f["prefix"] = opts[0]
		}
		if sep != ',' {
			opts = opts[1:]
		}
	case sep != ':':
		return nil, fmt.Errorf("--family %q: %s", v, familyForm)
	default:
		opts = strings.Split(after, ",")
		if opts[0] == "" {
			return nil, fmt.Errorf("--family %q: no key pattern after %q; %s", v, kind+":", familyForm)
		}
		f["match"], opts = opts[0], opts[1:]
	}
	seen := map[string]bool{}
	set := func(opts []string, given bool) error {
		for _, o := range opts {
			key, val, ok := strings.Cut(o, "=")
			switch {
			case !ok:
				return fmt.Errorf("--family %q: %q is not field=value (a value cannot hold a comma: give such a family in the config file)", v, o)
			case !fieldName.MatchString(key):
				return fmt.Errorf("--family %q: unknown field %q (fields are the YAML family's, lower case)", v, key)
			}
			// As the file refuses a field defined twice: the last one
			// won without a word.
			if given && key != "queues" && seen[key] {
				return fmt.Errorf("--family %q: %s given twice", v, key)
			}
			seen[key] = given
			if given && (key == "name" || key == "kind" || key == "match") {
				return fmt.Errorf("--family %q: %s is given by name=kind:pattern", v, key)
			}
			if given && key == "prefix" && f["prefix"] != nil {
				return fmt.Errorf("--family %q: prefix is given by name=kind:prefix", v)
			}
			if key == "queues" {
				qs, _ := f[key].([]any)
				f[key] = append(qs, flagValue(val))
				continue
			}
			f[key] = flagValue(val)
		}
		return nil
	}
	_ = set(FamilyDefaults[k], false)
	if err := set(opts, true); err != nil {
		return nil, err
	}
	return f, nil
}

// flagValue is a --family field's value: a YAML scalar (3, 90s, true, a
// quoted string) as the config file would read it, and anything else as
// the text given. Read as a whole YAML document, the regexp user=[a-z]+:(.*)
// was a list, and user=&x (.*) lost its "&x " to an anchor without a word.
func flagValue(val string) any {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(val), &doc); err != nil || len(doc.Content) != 1 {
		return val
	}
	n := doc.Content[0]
	if n.Kind != yaml.ScalarNode || n.Anchor != "" || n.Tag == "!!null" {
		return val
	}
	var x any
	if err := n.Decode(&x); err != nil {
		return val
	}
	return x
}

// apply writes o into the config text b (empty: no file).
func (o Overrides) apply(b []byte) ([]byte, error) {
	doc := map[string]any{}
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("yaml: %w", err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	if o.Addr != "" || o.Username != "" || o.PasswordFile != "" {
		r, _ := doc["redis"].(map[string]any)
		if r == nil {
			r = map[string]any{}
		}
		for k, v := range map[string]string{"addr": o.Addr, "username": o.Username, "password_file": o.PasswordFile} {
			if v != "" {
				r[k] = v
			}
		}
		doc["redis"] = r
	}
	if len(o.Families) > 0 {
		var fams []any
		for _, v := range o.Families {
			f, err := ParseFamilyFlag(v)
			if err != nil {
				return nil, err
			}
			fams = append(fams, f)
		}
		doc["families"] = fams
	}
	return yaml.Marshal(doc)
}

var familyPath = regexp.MustCompile(`^families\[(\d+)\]`)

// LoadWith is Load with o over the file; path "" is no file: o is the
// whole config. An error about a family from --family names the flag.
func LoadWith(path string, o Overrides) (*Config, error) {
	if o.Empty() && path == "" {
		return nil, fmt.Errorf("no configuration: %s", NoConfigHint)
	}
	var b []byte
	dir := ""
	if path != "" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, err
		}
		dir = filepath.Dir(path)
	}
	return parseWith(b, dir, o)
}

// ParseWith is Parse with o over b.
func ParseWith(b []byte, o Overrides) (*Config, error) { return parseWith(b, "", o) }

func parseWith(b []byte, dir string, o Overrides) (*Config, error) {
	merged := b
	if !o.Empty() {
		var err error
		if merged, err = o.apply(b); err != nil {
			return nil, err
		}
	}
	c, err := parse(merged, dir)
	if err != nil && len(o.Families) > 0 {
		if m := familyPath.FindStringSubmatch(err.Error()); m != nil {
			var i int
			fmt.Sscan(m[1], &i)
			if i < len(o.Families) {
				return nil, fmt.Errorf("--family %q%s", o.Families[i], strings.TrimPrefix(err.Error(), m[0]))
			}
		}
	}
	if err != nil && strings.HasPrefix(err.Error(), "redis.addr: required") && o.Addr == "" {
		err = fmt.Errorf("%w (set REDIS_ADDR)", err)
	}
	if err != nil {
		err = o.NameEnv(err)
	}
	return c, err
}

// NameEnv names the environment variable an error about a redis field
// came from: "redis.addr: passwords are not accepted in the config file"
// sent the person who set REDIS_ADDR looking for a file. The connection
// layer's errors (a password file it cannot read) go through it too.
func (o Overrides) NameEnv(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []struct{ field, env, value string }{
		{"redis.addr", "REDIS_ADDR", o.Addr},
		{"redis.username", "REDIS_USER", o.Username},
		{"redis.password_file", "REDIS_PASSWORD_FILE", o.PasswordFile},
	} {
		if rest, ok := strings.CutPrefix(err.Error(), e.field+": "); ok && e.value != "" {
			return fmt.Errorf("%s: %s", e.env, strings.Replace(rest, "in the config file", "here", 1))
		}
	}
	return err
}

// NoConfigHint says the ways to give a configuration.
const NoConfigHint = "give --config.file=FILE (or SLOT_EXPORTER_CONFIG=FILE), or REDIS_ADDR=host:port with --family name=kind:pattern; or try --demo, which needs neither"
