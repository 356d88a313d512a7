package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/slotexporter/slot_exporter/config"
)

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image      string            `yaml:"image"`
	Build      *build            `yaml:"build"`
	Entrypoint []string          `yaml:"entrypoint"`
	Command    []string          `yaml:"command"`
	Volumes    []volume          `yaml:"volumes"`
	ReadOnly   bool              `yaml:"read_only"`
	User       string            `yaml:"user"`
	Ports      []string          `yaml:"ports"`
	DependsOn  yaml.Node         `yaml:"depends_on"`
	Env        map[string]string `yaml:"environment"`
}

type build struct {
	Context    string `yaml:"context"`
	Target     string `yaml:"target"`
	Dockerfile string `yaml:"dockerfile"`
}

// volume is a compose volume in short ("src:dst[:mode]") or long syntax.
type volume struct {
	Type, Source, Target string
	ReadOnly             bool
}

func (v *volume) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		parts := strings.Split(n.Value, ":")
		switch len(parts) {
		case 1:
			v.Target = parts[0]
			v.Type = "volume"
			return nil
		case 3:
			v.ReadOnly = parts[2] == "ro"
		}
		v.Source, v.Target = parts[0], parts[1]
		v.Type = "volume"
		if strings.HasPrefix(v.Source, ".") || strings.HasPrefix(v.Source, "/") || strings.HasPrefix(v.Source, "~") {
			v.Type = "bind"
		}
		return nil
	}
	var long struct {
		Type     string `yaml:"type"`
		Source   string `yaml:"source"`
		Target   string `yaml:"target"`
		ReadOnly bool   `yaml:"read_only"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	*v = volume{long.Type, long.Source, long.Target, long.ReadOnly}
	return nil
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

// mountSource returns the host path mounted at target in service svc.
func mountSource(t *testing.T, c compose, svc, target string) string {
	t.Helper()
	for _, v := range c.Services[svc].Volumes {
		if v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("service %s mounts nothing at %s", svc, target)
	return ""
}

func tool(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required to check the deploy configuration but was not found on PATH (install it, or set %s=/path/to/%s)", name, env, name)
	}
	return p
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, s := range []string{"redis", "slot_exporter", "slotsim", "prometheus", "alertmanager", "grafana"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("service %s is missing", s)
		}
	}

	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		if s.Build != nil {
			if st, err := os.Stat(s.Build.Context); err != nil || !st.IsDir() {
				t.Errorf("service %s: build context %q is not a directory relative to deploy/", name, s.Build.Context)
			}
		}
		for _, v := range s.Volumes {
			switch v.Type {
			case "bind":
				if filepath.IsAbs(v.Source) || strings.HasPrefix(v.Source, "~") {
					t.Errorf("service %s: bind mount %q must be relative to deploy/, not a machine path", name, v.Source)
					continue
				}
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("service %s: bind-mounted host path %q does not exist relative to deploy/: %v", name, v.Source, err)
				}
				if !v.ReadOnly {
					t.Errorf("service %s: bind mount %q should be read-only (:ro)", name, v.Source)
				}
			case "volume":
				if _, ok := c.Volumes[v.Source]; v.Source != "" && !ok {
					t.Errorf("service %s: named volume %q is not declared", name, v.Source)
				}
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %q should be published on 127.0.0.1 only", name, p)
			}
		}
	}

	exp := c.Services["slot_exporter"]
	if exp.Build == nil || exp.Build.Context != ".." {
		t.Errorf("slot_exporter must be built from the repository's Dockerfile (context ..)")
	}
	if !exp.ReadOnly || exp.User != "nobody" {
		t.Errorf("slot_exporter: read_only %v, user %q; want a read-only root filesystem and user nobody", exp.ReadOnly, exp.User)
	}
	if got := mountSource(t, c, "slot_exporter", "/etc/slot_exporter/slot_exporter.yml"); got != "./slot_exporter.yml" {
		t.Errorf("slot_exporter config mounted from %q, want ./slot_exporter.yml", got)
	}
	if !slices.Contains(exp.Command, "--config.file=/etc/slot_exporter/slot_exporter.yml") {
		t.Errorf("slot_exporter does not load the mounted config: %v", exp.Command)
	}

	sim := c.Services["slotsim"]
	if !slices.Equal(sim.Entrypoint, []string{"/bin/slotsim"}) {
		t.Errorf("slotsim entrypoint %v, want [/bin/slotsim]", sim.Entrypoint)
	}
	if sim.Build == nil || sim.Build.Context != ".." || sim.Build.Target != "slotsim" {
		t.Errorf("slotsim must be built from the repository's Dockerfile, target slotsim (the exporter's image holds only the exporter)")
	}
	for _, a := range []string{"--redis.addr=redis:6379", "--scenario=incident"} {
		if !slices.Contains(sim.Command, a) {
			t.Errorf("slotsim args %v lack %s", sim.Command, a)
		}
	}

	if got := mountSource(t, c, "prometheus", "/etc/prometheus/rules/slot_exporter.rules.yml"); got != "../alerts/slot_exporter.rules.yml" {
		t.Errorf("prometheus rules mounted from %q, want ../alerts/slot_exporter.rules.yml", got)
	}
	mountSource(t, c, "prometheus", "/etc/prometheus/prometheus.yml")
	mountSource(t, c, "alertmanager", "/etc/alertmanager/alertmanager.yml")
	if got := mountSource(t, c, "grafana", "/var/lib/grafana/dashboards/slot_exporter"); got != "../dashboards" {
		t.Errorf("grafana dashboards mounted from %q, want ../dashboards", got)
	}
	if got := mountSource(t, c, "grafana", "/etc/grafana/provisioning"); got != "./grafana/provisioning" {
		t.Errorf("grafana provisioning mounted from %q", got)
	}
	home := c.Services["grafana"].Env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if rel, ok := strings.CutPrefix(home, "/var/lib/grafana/dashboards/slot_exporter/"); !ok {
		t.Errorf("grafana home dashboard %q is not in the mounted dashboards", home)
	} else if _, err := os.Stat(filepath.Join("..", "dashboards", rel)); err != nil {
		t.Errorf("grafana home dashboard: %v", err)
	}
}

type promConfig struct {
	Global struct {
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles []string `yaml:"rule_files"`
	Alerting  struct {
		Alertmanagers []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"alertmanagers"`
	} `yaml:"alerting"`
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		ScrapeInterval string `yaml:"scrape_interval"`
		StaticConfigs  []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func TestPrometheusConfig(t *testing.T) {
	promtool := tool(t, "promtool", "PROMTOOL")
	if out, err := exec.Command(promtool, "check", "config", "--syntax-only", "prometheus.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check config --syntax-only prometheus.yml: %v\n%s", err, out)
	}

	b, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var pc promConfig
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sc := range pc.ScrapeConfigs {
		for _, s := range sc.StaticConfigs {
			if slices.Contains(s.Targets, "slot_exporter:10121") {
				found = true
				if sc.JobName != "slot_exporter" || sc.ScrapeInterval != "5s" {
					t.Errorf("slot_exporter scraped as job %q every %q, want job slot_exporter every 5s", sc.JobName, sc.ScrapeInterval)
				}
			}
		}
	}
	if !found {
		t.Errorf("prometheus.yml does not scrape slot_exporter:10121")
	}
	am := false
	for _, a := range pc.Alerting.Alertmanagers {
		for _, s := range a.StaticConfigs {
			am = am || slices.Contains(s.Targets, "alertmanager:9093")
		}
	}
	if !am {
		t.Errorf("prometheus.yml does not alert to alertmanager:9093")
	}

	// rule_files are container paths. Map each through the compose mounts to
	// the repository file, and check the whole config (rules included) with a
	// copy that points there.
	c := loadCompose(t)
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(pc.RuleFiles) == 0 {
		t.Fatalf("prometheus.yml has no rule_files")
	}
	for _, rf := range pc.RuleFiles {
		src := mountSource(t, c, "prometheus", rf)
		abs, err := filepath.Abs(src)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(rf), []byte(abs))
	}
	tmp := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config (rule_files mapped to the repository): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "rules found") {
		t.Errorf("promtool did not check the rule files:\n%s", out)
	}
}

func TestAlertmanagerConfig(t *testing.T) {
	amtool := tool(t, "amtool", "AMTOOL")
	if out, err := exec.Command(amtool, "check-config", "alertmanager.yml").CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config alertmanager.yml: %v\n%s", err, out)
	}
	// And amtool does reject a broken file, so the check above means something.
	tmp := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(tmp, []byte("route:\n  receiver: nobody\nreceivers: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", tmp).CombinedOutput(); err == nil {
		t.Fatalf("amtool accepted a route to an undefined receiver:\n%s", out)
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL string
		} `yaml:"datasources"`
	}
	b, err := os.ReadFile("grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].UID != "prometheus" || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasource provisioning: %+v; want one prometheus datasource, uid prometheus, at http://prometheus:9090", ds.Datasources)
	}

	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name    string `yaml:"name"`
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	b, err = os.ReadFile("grafana/provisioning/dashboards/slot.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &dp); err != nil {
		t.Fatal(err)
	}
	c := loadCompose(t)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard provisioning: %+v; want one file provider", dp.Providers)
	}
	if src := mountSource(t, c, "grafana", dp.Providers[0].Options.Path); src != "../dashboards" {
		t.Errorf("the dashboard provider reads %s, mounted from %q, want ../dashboards", dp.Providers[0].Options.Path, src)
	}
}

// TestExporterConfig decodes the exporter config strictly against the config
// package's types (unknown fields are errors, as in the exporter), and runs
// config.Parse once that is implemented.
func TestExporterConfig(t *testing.T) {
	b, err := os.ReadFile("slot_exporter.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("slot_exporter.yml: %v", err)
	}
	if cfg.Redis.Addr != "redis:6379" {
		t.Errorf("redis.addr %q, want the compose service redis:6379", cfg.Redis.Addr)
	}
	if len(cfg.Families) == 0 {
		t.Fatal("no families")
	}

	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Logf("config.Parse is not implemented yet (%v); only the strict decode was checked", r)
			}
		}()
		if _, err := config.Parse(b); err != nil {
			t.Errorf("config.Parse(slot_exporter.yml): %v", err)
		}
	}()
}
