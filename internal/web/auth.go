package web

import (
	"errors"
	"fmt"
	"os"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
)

// CheckRelease says whether release may be turned on: every release is
// made by a named operator, so the web config file must define basic-auth
// users (exporter-toolkit then asks for credentials on every path), and
// every release is audited, so an audit file must be given.
func CheckRelease(webConfigFile, auditFile string) error {
	if webConfigFile == "" {
		return errors.New("--web.enable-release needs --web.config.file with basic_auth_users: every release is made by a named operator")
	}
	if err := authUsers(webConfigFile); err != nil {
		return err
	}
	if auditFile == "" {
		return errors.New("--web.enable-release needs --release.audit-file: every preview and release is audited")
	}
	return nil
}

// authUsers checks that a web config file is valid (as exporter-toolkit
// reads it) and has basic-auth users.
func authUsers(path string) error {
	if err := toolkit.Validate(path); err != nil {
		return fmt.Errorf("--web.config.file: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--web.config.file: %w", err)
	}
	var c struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("--web.config.file: %w", err)
	}
	if len(c.Users) == 0 {
		return fmt.Errorf("--web.enable-release needs basic_auth_users in --web.config.file %s: every release is made by a named operator", path)
	}
	return nil
}
