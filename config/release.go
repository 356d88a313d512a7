package config

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Release names the Redis ACL user that the release button and the release
// command write as. The sampling user stays read-only: releases never use
// it. The password, like the sampling one, lives in a file, never in the
// YAML.
type Release struct {
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
}

func decodeRelease(n *yaml.Node, path string) (*Release, error) {
	r := &Release{}
	_, err := mapping(n, path, map[string]fieldFunc{
		"username":      str(&r.Username),
		"password_file": str(&r.PasswordFile),
	}, func(key string) error {
		if strings.EqualFold(key, "password") {
			return errf(join(path, key), "passwords are not accepted in the config file; put it in a file named by release.password_file")
		}
		return nil
	})
	return r, err
}

// validateRelease checks the release block. Releases write with their own
// ACL user so that the sampling user can stay read-only: one user for both
// would give the sampler write access.
func validateRelease(r *Release, redis *Redis) error {
	if r == nil {
		return nil
	}
	if r.Username == "" {
		return errors.New("release.username: required (the Redis ACL user that releases write as)")
	}
	sampling := redis.Username
	if sampling == "" {
		sampling = "default"
	}
	if r.Username == sampling {
		return fmt.Errorf("release.username: must differ from the sampling user %q, which stays read-only", sampling)
	}
	return nil
}
