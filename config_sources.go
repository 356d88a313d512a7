package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slotexporter/slot_exporter/config"
)

const (
	configEnv         = "SLOT_EXPORTER_CONFIG"
	defaultConfigFile = "slot_exporter.yml"
)

// sources is where the configuration comes from: a file, and the flags'
// and environment's settings over it (flag > env > file).
type sources struct {
	file, fileFrom string
	overrides      config.Overrides
	from           map[string]string // setting -> where it came from
}

// configSources picks the config file (--config.file, else
// SLOT_EXPORTER_CONFIG, else ./slot_exporter.yml if it exists) and the
// settings given outside it. The demo runs its own config unless a file
// is named; the environment's Redis then points nowhere it means.
func configSources(flagFile string, flagGiven bool, families []string, demo bool) sources {
	s := sources{from: map[string]string{}}
	switch {
	case flagGiven:
		s.file, s.fileFrom = flagFile, "--config.file"
	case os.Getenv(configEnv) != "":
		s.file, s.fileFrom = os.Getenv(configEnv), configEnv
	case demo:
		return s
	default:
		if _, err := os.Stat(defaultConfigFile); err == nil {
			s.file, s.fileFrom = defaultConfigFile, "default"
		}
	}
	if demo && s.file == "" {
		return s
	}
	for _, v := range []struct {
		env string
		to  *string
		key string
	}{
		{"REDIS_ADDR", &s.overrides.Addr, "redis.addr"},
		{"REDIS_USER", &s.overrides.Username, "redis.username"},
		{"REDIS_PASSWORD_FILE", &s.overrides.PasswordFile, "redis.password_file"},
	} {
		if x := os.Getenv(v.env); x != "" {
			*v.to = x
			s.from[v.key] = v.env
		}
	}
	// A relative path in the environment means the working directory's,
	// not the config file's.
	if p := s.overrides.PasswordFile; p != "" && !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			s.overrides.PasswordFile = abs
		}
	}
	if os.Getenv(config.PasswordEnv) != "" {
		s.from["redis password"] = config.PasswordEnv
	}
	if len(families) > 0 {
		s.overrides.Families = families
		s.from["families"] = "--family"
	}
	return s
}

// name is what errors about the configuration are prefixed with.
func (s sources) name() string {
	if s.file != "" {
		return s.file
	}
	return "configuration"
}

// attrs say, at start-up, where each part of the configuration came from.
func (s sources) attrs() []any {
	file := "none"
	if s.file != "" {
		file = s.file + " (" + s.fileFrom + ")"
	}
	out := []any{"file", file}
	for _, k := range []string{"redis.addr", "redis.username", "redis.password_file", "redis password", "families"} {
		if from, ok := s.from[k]; ok {
			out = append(out, strings.ReplaceAll(k, " ", "_"), "from "+from)
		}
	}
	return out
}

// listen binds the TCP listen addresses; nil (and no error) when the
// toolkit must bind them itself (systemd sockets, vsock).
func listen(flags *web.FlagConfig) ([]net.Listener, error) {
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		return nil, nil
	}
	if flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 {
		return nil, errors.New("no --web.listen-address")
	}
	for _, a := range *flags.WebListenAddresses {
		if strings.HasPrefix(a, "vsock://") {
			return nil, nil
		}
	}
	var ls []net.Listener
	for _, a := range *flags.WebListenAddresses {
		l, err := net.Listen("tcp", a)
		if err != nil {
			closeAll(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}
