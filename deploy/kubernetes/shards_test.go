package kubernetes

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// PodIndexLabel is the label the StatefulSet controller sets on each pod to
// its ordinal (Kubernetes 1.28 or later).
const PodIndexLabel = "apps.kubernetes.io/pod-index"

// shardArgRE is the only --sampling.shard a pod may be given: its own index
// over n.
var shardArgRE = regexp.MustCompile(`^--sampling\.shard=\$\(POD_INDEX\)/([0-9]+)$`)

// shardCount checks that the StatefulSet gives each pod the shard of its
// ordinal, i/n with n its replicas, and returns n.
func shardCount(t *testing.T, s *appsv1.StatefulSet) int {
	t.Helper()
	c := s.Spec.Template.Spec.Containers[0]
	var ns []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--sampling.shard") {
			m := shardArgRE.FindStringSubmatch(a)
			if m == nil {
				t.Fatalf("arg %q: want --sampling.shard=$(POD_INDEX)/n", a)
			}
			ns = append(ns, m[1])
		}
	}
	if len(ns) != 1 {
		t.Fatalf("args %q: want one --sampling.shard, have %d", c.Args, len(ns))
	}
	n, err := strconv.Atoi(ns[0])
	if err != nil || n < 1 || n > 16384 {
		t.Fatalf("shard count %q: want 1 to 16384", ns[0])
	}
	if s.Spec.Replicas == nil || int(*s.Spec.Replicas) != n {
		t.Errorf("replicas %s, shards %d: every shard needs exactly one pod, or its keys go unread or are counted twice", deref(s.Spec.Replicas), n)
	}
	// Ordinals from 0: a shifted start would give the last pods an index
	// of n or more, which the exporter refuses.
	if o := s.Spec.Ordinals; o != nil && o.Start != 0 {
		t.Errorf("ordinals start at %d, want 0: the pod index is the shard index", o.Start)
	}
	found := false
	for _, e := range c.Env {
		if e.Name != "POD_INDEX" {
			continue
		}
		found = true
		want := "metadata.labels['" + PodIndexLabel + "']"
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != want {
			t.Errorf("POD_INDEX = %+v, want the downward API's %s", e, want)
		}
	}
	if !found {
		t.Errorf("no POD_INDEX in the container's env: Kubernetes would leave $(POD_INDEX) as it is")
	}
	return n
}

// TestShardsFollowThePodIndex: the pods 0 to n-1 of the StatefulSet read
// the shards 0/n to n-1/n, n being its replicas, and the config file leaves
// the shard to the flag.
func TestShardsFollowThePodIndex(t *testing.T) {
	b := build(t)
	n := shardCount(t, b.statefulSet)
	if n < 2 {
		t.Errorf("%d shard: the manifests are meant to show sharding", n)
	}
	for _, cm := range b.configMaps {
		conf, ok := cm.Data["slot_exporter.yml"]
		if !ok {
			continue
		}
		var parsed struct {
			Sampling map[string]any `json:"sampling"`
		}
		if err := yaml.Unmarshal([]byte(conf), &parsed); err != nil {
			t.Fatal(err)
		}
		if v, ok := parsed.Sampling["shard"]; ok {
			t.Errorf("%s: sampling.shard %v in the shared file; each pod's --sampling.shard overrides it", cm.Name, v)
		}
	}
}

// copyBase copies this kustomization into a new directory and returns it.
func copyBase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob("*.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func buildStatefulSet(t *testing.T, dir string) *appsv1.StatefulSet {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	for _, r := range m.Resources() {
		if r.GetKind() != "StatefulSet" {
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var s appsv1.StatefulSet
		if err := yaml.UnmarshalStrict(y, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	t.Fatal("no StatefulSet")
	return nil
}

// TestShardCountIsReplicas: changing the replicas alone changes the shard
// count, whether in statefulset.yaml, with `kustomize edit set replicas`
// (the replicas field of kustomization.yaml), or in an overlay that
// carries the replacement as README.md shows it.
func TestShardCountIsReplicas(t *testing.T) {
	dir := copyBase(t)
	path := filepath.Join(dir, "statefulset.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "\n  replicas: 3\n", "\n  replicas: 4\n", 1)
	if edited == string(b) {
		t.Fatal("statefulset.yaml has no `replicas: 3` to edit")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := shardCount(t, buildStatefulSet(t, dir)); n != 4 {
		t.Errorf("replicas 4 in statefulset.yaml: %d shards", n)
	}

	dir = copyBase(t)
	f, err := os.OpenFile(filepath.Join(dir, "kustomization.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// What `kustomize edit set replicas slot-exporter=5` writes.
	_, err = f.WriteString("\nreplicas:\n  - name: slot-exporter\n    count: 5\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := shardCount(t, buildStatefulSet(t, dir)); n != 5 {
		t.Errorf("replicas 5 in kustomization.yaml: %d shards", n)
	}

	overlay := readmeOverlay(t)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	odir := t.TempDir()
	rel, err := filepath.Rel(odir, here)
	if err != nil {
		t.Fatal(err)
	}
	overlay = strings.Replace(overlay, "  - ../slot-exporter\n", "  - "+filepath.ToSlash(rel)+"\n", 1)
	if err := os.WriteFile(filepath.Join(odir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	s := buildStatefulSet(t, odir)
	if n := shardCount(t, s); n != int(*s.Spec.Replicas) || n == 3 {
		t.Errorf("README's overlay: %d shards, replicas %d; want both changed from 3", n, *s.Spec.Replicas)
	}
}

// readmeOverlay is the overlay README.md gives for changing the count:
// the first yaml block that has a replacements field.
func readmeOverlay(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "replacements:") {
			if !strings.Contains(block, "  - ../slot-exporter\n") {
				t.Fatalf("README.md's overlay does not name this directory as ../slot-exporter:\n%s", block)
			}
			return block
		}
	}
	t.Fatal("README.md has no overlay with replacements")
	return ""
}
