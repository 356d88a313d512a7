package kubernetes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// built is the kustomization as `kubectl apply -k` would send it, every
// object decoded into its API type.
type built struct {
	statefulSet    *appsv1.StatefulSet
	service        *corev1.Service
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
	configMaps     map[string]*corev1.ConfigMap
}

func build(t *testing.T) built {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	// Strict: an unknown or duplicate field is an error, as `kubectl apply
	// --validate=strict` would make it; an unregistered kind is one too.
	dec := k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme, scheme,
		k8sjson.SerializerOptions{Yaml: true, Strict: true})

	b := built{configMaps: map[string]*corev1.ConfigMap{}}
	counts := map[string]int{}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, gvk, err := dec.Decode(y, nil, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", r.GetKind(), r.GetName(), err)
		}
		counts[gvk.Kind]++
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			b.statefulSet = o
		case *corev1.Service:
			b.service = o
		case *monitoringv1.ServiceMonitor:
			b.serviceMonitor = o
		case *monitoringv1.PrometheusRule:
			b.rule = o
		case *corev1.ConfigMap:
			b.configMaps[o.Name] = o
		default:
			t.Fatalf("unexpected object %s %s", gvk, r.GetName())
		}
	}
	dashboards, err := filepath.Glob(filepath.Join("..", "..", DashboardsSource, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"StatefulSet": 1, "Service": 1, "ServiceMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1 + len(dashboards)}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("objects by kind = %v, want %v", counts, want)
	}
	return b
}

func TestObjectNamesAndLabelsAreValid(t *testing.T) {
	b := build(t)
	metas := []metav1.ObjectMeta{b.statefulSet.ObjectMeta, b.statefulSet.Spec.Template.ObjectMeta,
		b.service.ObjectMeta, b.serviceMonitor.ObjectMeta, b.rule.ObjectMeta}
	for _, cm := range b.configMaps {
		metas = append(metas, cm.ObjectMeta)
	}
	for _, m := range metas {
		if m.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
				t.Errorf("name %q: %s", m.Name, msg)
			}
		}
		for k, v := range m.Labels {
			for _, msg := range validation.IsQualifiedName(k) {
				t.Errorf("%s: label key %q: %s", m.Name, k, msg)
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				t.Errorf("%s: label %s=%q: %s", m.Name, k, v, msg)
			}
		}
		if m.Labels["app.kubernetes.io/name"] != Name {
			t.Errorf("object %q: app.kubernetes.io/name = %q, want %q", m.Name, m.Labels["app.kubernetes.io/name"], Name)
		}
	}
}

// imageUser reads the USER of the Dockerfile's last stage.
func imageUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	user := ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && strings.EqualFold(fields[0], "USER") {
			user = fields[1]
		}
	}
	if _, err := fmt.Sscanf(user, "%d:%d", &uid, &gid); err != nil {
		t.Fatalf("Dockerfile USER %q: want numeric uid:gid (%v)", user, err)
	}
	return uid, gid
}

func TestSecurityContext(t *testing.T) {
	b := build(t)
	pod := b.statefulSet.Spec.Template.Spec
	uid, gid := imageUser(t)

	psc := pod.SecurityContext
	if psc == nil {
		t.Fatal("no pod securityContext")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod: runAsNonRoot is not true")
	}
	if got := fmt.Sprintf("%s:%s", deref(psc.RunAsUser), deref(psc.RunAsGroup)); got != fmt.Sprintf("%d:%d", uid, gid) {
		t.Errorf("pod: runAsUser:runAsGroup = %s, want the image's %d:%d", got, uid, gid)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod: seccompProfile = %v, want RuntimeDefault", psc.SeccompProfile)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("pod: the service account token is mounted; the exporter never calls the API")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("pod: shares a host namespace")
	}

	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers, %d init containers; want 1 and 0", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container: no securityContext")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("container: readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container: allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container: privileged")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Error("container: runs as root")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container: capabilities = %+v, want drop [ALL], add none", sc.Capabilities)
	}
}

// containerPort resolves a probe or Service port, named or numbered, to the
// container's port number; 0 when nothing matches.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

func TestProbesPortsAndResources(t *testing.T) {
	b := build(t)
	c := b.statefulSet.Spec.Template.Spec.Containers[0]

	if len(c.Ports) != 1 || c.Ports[0].Name != "http-metrics" || c.Ports[0].ContainerPort != 10121 {
		t.Fatalf("container ports = %+v, want http-metrics 10121", c.Ports)
	}
	if !hasArg(c.Args, "--web.listen-address=:10121") {
		t.Errorf("args %q: the exporter does not listen on the container port", c.Args)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/-/healthy"}, {"readiness", c.ReadinessProbe, "/-/ready"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: path %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if containerPort(c, p.probe.HTTPGet.Port) != 10121 {
			t.Errorf("%s: port %v is not the exporter's", p.name, p.probe.HTTPGet.Port.String())
		}
		if s := p.probe.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP {
			t.Errorf("%s: scheme %s", p.name, s)
		}
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[res]
		lim, okLim := c.Resources.Limits[res]
		if !okReq || !okLim {
			t.Errorf("%s: request %v, limit %v; want both", res, req.String(), lim.String())
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s above limit %s", res, req.String(), lim.String())
		}
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			// The exporter sets 90% of the container's limit itself
			// (internal/gctarget); GOMEMLIMIT from limits.memory would be
			// all of it, and RSS would reach the limit first.
			t.Errorf("GOMEMLIMIT set (%+v): it would override the exporter's 90%% of the limit", e)
		}
		if e.Name == "REDIS_PASSWORD" {
			t.Error("REDIS_PASSWORD set: it would win over the mounted password file")
		}
	}
}

// deref prints an optional number, or "unset".
func deref[T int32 | int64](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

func TestServiceAndServiceMonitorReachThePod(t *testing.T) {
	b := build(t)
	d, svc, sm := b.statefulSet, b.service, b.serviceMonitor
	podLabels := labels.Set(d.Spec.Template.Labels)

	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sel, podLabels)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, podLabels)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service ports = %+v, want one", svc.Spec.Ports)
	}
	sp := svc.Spec.Ports[0]
	if sp.Name != "http-metrics" || sp.Port != 10121 {
		t.Errorf("Service port = %s %d, want http-metrics 10121", sp.Name, sp.Port)
	}
	if containerPort(d.Spec.Template.Spec.Containers[0], sp.TargetPort) != 10121 {
		t.Errorf("Service targetPort %s is not the exporter's port", sp.TargetPort.String())
	}
	// Every shard is a target of its own: a load-balanced address would
	// give Prometheus one pod's share at a time.
	if d.Spec.ServiceName != svc.Name || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("StatefulSet serviceName %q, Service %s with clusterIP %q: want the StatefulSet governed by a headless Service", d.Spec.ServiceName, svc.Name, svc.Spec.ClusterIP)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("Service does not publish unready pods: a shard that cannot reach Redis would not be scraped, and its slot_exporter_up 0 not seen")
	}

	smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if smSel.Empty() || !smSel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the Service's labels %v", smSel, svc.Labels)
	}
	if ns := sm.Spec.NamespaceSelector; ns.Any || len(ns.MatchNames) > 0 {
		t.Errorf("ServiceMonitor looks beyond its own namespace: %+v", ns)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints = %d, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != sp.Name {
		t.Errorf("ServiceMonitor endpoint port %v, want the Service's %q", ep.Port, sp.Name)
	}
	if ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor path %q, want /metrics", ep.Path)
	}
}

// The StatefulSet mounts the generated config ConfigMap and the password
// Secret where the config and the flags say they are.
func TestConfigAndPasswordFileAreWhereTheConfigSays(t *testing.T) {
	b := build(t)
	pod := b.statefulSet.Spec.Template.Spec
	c := pod.Containers[0]

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	// file resolves a path in the container to the volume and key behind it.
	file := func(p string) (corev1.Volume, string, bool) {
		for _, m := range c.VolumeMounts {
			if path.Dir(p) == m.MountPath {
				v, ok := volumes[m.Name]
				if !m.ReadOnly {
					t.Errorf("mount %s is writable", m.MountPath)
				}
				return v, path.Base(p), ok
			}
		}
		return corev1.Volume{}, "", false
	}

	var configPath string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			configPath = v
		}
	}
	v, key, ok := file(configPath)
	if !ok || v.ConfigMap == nil {
		t.Fatalf("--config.file=%s is not in a mounted ConfigMap", configPath)
	}
	cm := b.configMaps[v.ConfigMap.Name]
	if cm == nil {
		t.Fatalf("volume %s names ConfigMap %s, which the kustomization does not make (have %v)", v.Name, v.ConfigMap.Name, keys(b.configMaps))
	}
	if !regexp.MustCompile(`^slot-exporter-config-[a-z0-9]+$`).MatchString(cm.Name) {
		t.Errorf("config ConfigMap %s has no content hash: a config change would not roll the pods", cm.Name)
	}
	conf, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
	}

	var parsed struct {
		Redis struct {
			Addr         string `json:"addr"`
			PasswordFile string `json:"password_file"`
		} `json:"redis"`
		Families []struct {
			Name string `json:"name"`
		} `json:"families"`
	}
	if err := yaml.Unmarshal([]byte(conf), &parsed); err != nil {
		t.Fatalf("config: %v", err)
	}
	if parsed.Redis.Addr == "" || len(parsed.Families) == 0 {
		t.Errorf("config has no redis.addr or no families: %+v", parsed)
	}
	pv, pkey, ok := file(parsed.Redis.PasswordFile)
	if !ok || pv.Secret == nil {
		t.Fatalf("redis.password_file %q is not in a mounted Secret", parsed.Redis.PasswordFile)
	}
	found := false
	for _, it := range pv.Secret.Items {
		found = found || it.Path == pkey
	}
	if !found {
		t.Errorf("Secret volume %s does not project %s (items %+v)", pv.Name, pkey, pv.Secret.Items)
	}
	switch m := pv.Secret.DefaultMode; {
	case m == nil:
		t.Error("Secret volume has no defaultMode: Kubernetes makes it 0644, readable by every user")
	case *m&0o007 != 0:
		t.Errorf("Secret volume mode %o: the password is readable by every user", *m)
	}
	if pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != *pod.SecurityContext.RunAsGroup {
		t.Error("fsGroup is not the pod's group: the exporter cannot read a 0440 password file")
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestDashboardConfigMaps(t *testing.T) {
	b := build(t)
	n := 0
	for _, cm := range b.configMaps {
		if cm.Labels[DashboardLabel] != "1" {
			continue
		}
		n++
		if len(cm.Data) != 1 {
			t.Errorf("%s: %d keys, want one dashboard", cm.Name, len(cm.Data))
		}
		for k, v := range cm.Data {
			var d struct {
				UID   string `json:"uid"`
				Title string `json:"title"`
			}
			if !strings.HasSuffix(k, ".json") || json.Unmarshal([]byte(v), &d) != nil || d.UID == "" || d.Title == "" {
				t.Errorf("%s: key %s is not a dashboard with a uid and a title", cm.Name, k)
			}
		}
		// kubectl's client-side apply copies the object into an annotation,
		// which may not exceed 256 KiB.
		j, err := json.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		if len(j) >= 256<<10 {
			t.Errorf("%s: %d bytes; `kubectl apply` refuses objects over 256 KiB", cm.Name, len(j))
		}
	}
	if n == 0 {
		t.Error("no ConfigMap carries the Grafana sidecar label")
	}
}

func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	b := build(t)
	want, err := PrometheusRule(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if d := ruleDrift(want, b.rule); len(b.rule.Spec.Groups) == 0 || len(d) > 0 {
		t.Errorf("the PrometheusRule in the build is not the rules file: %v", d)
	}
}

// README.md tells kube-prometheus-stack users to add its release label with
// `labels:`; that must reach the ServiceMonitor and the PrometheusRule and
// leave the selectors alone (a changed StatefulSet selector cannot be applied
// over the old one).
func TestReleaseLabelOverlay(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	// kustomize takes no absolute paths to a base.
	rel, err := filepath.Rel(overlay, here)
	if err != nil {
		t.Fatal(err)
	}
	kust := "resources:\n  - " + filepath.ToSlash(rel) + "\nlabels:\n  - pairs:\n      release: kube-prometheus-stack\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatalf("kustomize build of the overlay: %v", err)
	}
	base := build(t)
	for _, r := range m.Resources() {
		if r.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("%s %s: no release label", r.GetKind(), r.GetName())
		}
		if r.GetKind() != "StatefulSet" && r.GetKind() != "Service" {
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Spec struct {
				Selector json.RawMessage `json:"selector"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(y, &obj); err != nil {
			t.Fatal(err)
		}
		var want any = base.service.Spec.Selector
		if r.GetKind() == "StatefulSet" {
			want = base.statefulSet.Spec.Selector
		}
		w, _ := json.Marshal(want)
		var a, b any
		_ = json.Unmarshal(w, &a)
		_ = json.Unmarshal(obj.Spec.Selector, &b)
		if b == nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s selector changed by the overlay: %s, was %s", r.GetKind(), obj.Spec.Selector, w)
		}
	}
}
