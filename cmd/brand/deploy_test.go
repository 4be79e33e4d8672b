package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/cluster/membership"
)

// deployDir holds the Kubernetes manifests (docs/scale-out.md).
const deployDir = "../../deploy/kubernetes"

// testNamespace is the namespace the pods are placed in here: the
// manifests name none, so any will do, and the peer list must follow it.
const testNamespace = "team-a"

// TestDeployKubernetes renders every kustomization under deploy/kubernetes
// as kustomize would, with and without its components, and checks what a
// cluster needs to start and lay itself out correctly:
//
//   - every container that runs brand has a command line its subcommand's
//     own flags accept (checkBrandArgs: the binary's flag sets, through run),
//     in every pod of the StatefulSet once Kubernetes has expanded
//     $(POD_NAME) and $(POD_NAMESPACE);
//   - the StatefulSet lists its members from the headless Service's DNS
//     (--peers-dns, the SRV records of its port named http), and at any
//     number of replicas those records list pod K under the URL it
//     advertises: kubectl scale alone resizes the cluster;
//   - readiness is probed on /readyz and liveness on /healthz, on the port
//     brand serves;
//   - the memory limit holds the cache and the Go heap brand serve allows
//     beside it, and is also what is requested;
//   - a token file, if any, is mounted from a Secret;
//   - the pack Job writes the dataset the gateways serve.
func TestDeployKubernetes(t *testing.T) {
	checkEntrypoint(t)
	tree := loadDeployTree(t)
	var serveDatasets, packDsts []string
	for _, root := range tree.roots {
		k := tree.kustomizations[root]
		variants := []bool{false}
		if len(k.Components) > 0 {
			variants = append(variants, true)
		}
		for _, withComponents := range variants {
			name := root
			if withComponents {
				name += "+" + strings.Join(k.Components, "+")
			}
			t.Run(name, func(t *testing.T) {
				objs := tree.render(t, root, withComponents)
				found := checkObjects(t, objs, k.imageNames())
				serveDatasets = append(serveDatasets, found.serveDatasets...)
				packDsts = append(packDsts, found.packDsts...)
			})
		}
	}
	if unused := tree.unreferenced(); len(unused) > 0 {
		t.Errorf("%v: YAML that no kustomization lists (kubectl apply -k would leave it out)", unused)
	}
	if len(serveDatasets) == 0 || len(packDsts) == 0 {
		t.Fatalf("the manifests run no brand serve (datasets %q) or no brand pack (%q)", serveDatasets, packDsts)
	}
	for _, dst := range packDsts {
		if !slices.Contains(serveDatasets, dst) {
			t.Errorf("the pack Job writes %s, which no gateway serves (they serve %q)", dst, serveDatasets)
		}
	}
}

// TestDeployCheckBrandArgs holds checkBrandArgs to failing on the mistakes a
// manifest can make, so TestDeployKubernetes cannot pass by accepting
// anything.
func TestDeployCheckBrandArgs(t *testing.T) {
	serve := []string{"serve", "--listen", ":8080", "--dataset", "train=s3://brand/train", "--cache-size", "8GiB"}
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"valid serve", serve, true},
		{"valid with = form", []string{"serve", "--cache-size=8GiB", "--peers=http://a:1,http://b:1", "--self=1"}, true},
		{"valid DNS members", []string{"serve", "--peers-dns", "brand.ns.svc.cluster.local", "--advertise", "http://brand-0.brand.ns.svc.cluster.local:8080"}, true},
		{"valid pack", []string{"pack", "--src", "/data", "--dst", "s3://b/p", "--create-bucket"}, true},
		{"misspelled flag", append(slices.Clone(serve), "--cache-sise", "1GiB"), false},
		{"flag of another subcommand", append(slices.Clone(serve), "--create-bucket"), false},
		{"bad value", []string{"serve", "--cache-size", "lots"}, false},
		{"stray argument", []string{"serve", "--listen", ":8080", "8GiB"}, false},
		{"unknown subcommand", []string{"server", "--listen", ":8080"}, false},
		{"subcommand without flags", []string{"version", "--anything"}, false},
		{"help", []string{"help"}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBrandArgs(t, tt.args)
			if (err == nil) != tt.ok {
				t.Fatalf("checkBrandArgs(%q) = %v, want ok %v", tt.args, err, tt.ok)
			}
		})
	}
}

// checkBrandArgs runs `brand ARGS -h` in-process. The subcommand's own
// FlagSet parses every flag before -h and, if all of them are defined and
// their values valid, reaches -h, prints its usage and exits 0. A
// misspelled flag, a bad value or a stray argument (which ends flag
// parsing before -h) fails instead; so does a subcommand that reads no
// flags, since it prints no usage.
func checkBrandArgs(t *testing.T, args []string) error {
	if len(args) == 0 {
		return errors.New("no subcommand")
	}
	var out syncBuffer
	env := &cli.Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	code := run(t.Context(), env, append(slices.Clone(args), "-h"))
	if code != 0 || !strings.Contains(out.String(), "Usage: brand "+args[0]+" ") {
		return fmt.Errorf("brand %q is not a valid command line (exit %d with -h appended):\n%s", args, code, out.String())
	}
	return nil
}

// checkEntrypoint checks the image runs brand when a container gives only
// args, as the manifests' containers do.
func checkEntrypoint(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/brand"\]$`).Match(raw) {
		t.Fatal(`the Dockerfile's ENTRYPOINT is not ["/usr/local/bin/brand"]; the manifests pass brand's arguments as args`)
	}
}

// kustomization is the part of a kustomization.yaml (kind Kustomization
// or Component) the test renders.
type kustomization struct {
	Kind       string
	Resources  []string
	Components []string
	Patches    []struct {
		Path   string
		Patch  string
		Target struct{ Kind, Name string }
	}
	Images []struct{ Name string }
}

func (k kustomization) imageNames() []string {
	var out []string
	for _, im := range k.Images {
		out = append(out, im.Name)
	}
	return out
}

// deployTree is deploy/kubernetes: its kustomizations, by directory
// relative to deployDir, and which YAML files they refer to.
type deployTree struct {
	kustomizations map[string]kustomization
	roots          []string // directories of kind Kustomization
	yamlFiles      []string
	referenced     map[string]bool
}

func loadDeployTree(t *testing.T) *deployTree {
	t.Helper()
	tree := &deployTree{kustomizations: map[string]kustomization{}, referenced: map[string]bool{}}
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml")) {
			return err
		}
		rel, _ := filepath.Rel(deployDir, p)
		tree.yamlFiles = append(tree.yamlFiles, filepath.ToSlash(rel))
		if d.Name() != "kustomization.yaml" {
			return nil
		}
		var k kustomization
		if err := yaml.Unmarshal(readFile(t, p), &k); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		dir := path.Dir(filepath.ToSlash(rel))
		tree.kustomizations[dir] = k
		tree.referenced[filepath.ToSlash(rel)] = true
		switch k.Kind {
		case "Kustomization":
			tree.roots = append(tree.roots, dir)
		case "Component":
		default:
			return fmt.Errorf("%s: kind %q, want Kustomization or Component", rel, k.Kind)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tree.roots, ".") {
		t.Fatalf("%s has no kustomization.yaml of kind Kustomization", deployDir)
	}
	return tree
}

// render returns the objects kustomize would build at root: its resources,
// with its components' patches applied if withComponents. It understands
// what these manifests use (file resources, components of JSON patches
// given by path, "add" operations) and fails on anything else rather than
// check less than kustomize would apply.
func (tree *deployTree) render(t *testing.T, root string, withComponents bool) []map[string]any {
	t.Helper()
	k := tree.kustomizations[root]
	var objs []map[string]any
	for _, r := range k.Resources {
		file := path.Join(root, r)
		tree.referenced[file] = true
		dec := yaml.NewDecoder(bytes.NewReader(readFile(t, filepath.Join(deployDir, file))))
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if obj != nil {
				objs = append(objs, obj)
			}
		}
	}
	for _, c := range k.Components {
		dir := path.Join(root, c)
		comp, ok := tree.kustomizations[dir]
		if !ok || comp.Kind != "Component" {
			t.Fatalf("%s: component %s is not a directory with a kustomization.yaml of kind Component", root, c)
		}
		for _, p := range comp.Patches {
			if p.Path == "" {
				t.Fatalf("%s: an inline patch; this test reads patches from files", dir)
			}
			file := path.Join(dir, p.Path)
			tree.referenced[file] = true
			if !withComponents {
				continue
			}
			var ops []struct {
				Op, Path string
				Value    any
			}
			if err := yaml.Unmarshal(readFile(t, filepath.Join(deployDir, file)), &ops); err != nil {
				t.Fatalf("%s: not a JSON patch: %v", file, err)
			}
			target := findObject(t, objs, p.Target.Kind, p.Target.Name)
			for _, op := range ops {
				if op.Op != "add" {
					t.Fatalf("%s: operation %q; this test applies only add", file, op.Op)
				}
				if _, err := patchAdd(target, splitPointer(op.Path), op.Value); err != nil {
					t.Fatalf("%s: add %s: %v", file, op.Path, err)
				}
			}
		}
	}
	return objs
}

func (tree *deployTree) unreferenced() []string {
	var out []string
	for _, f := range tree.yamlFiles {
		if !tree.referenced[f] {
			out = append(out, f)
		}
	}
	return out
}

func findObject(t *testing.T, objs []map[string]any, kind, name string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, o := range objs {
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		convert(t, o, &meta)
		if meta.Kind == kind && meta.Metadata.Name == name {
			if found != nil {
				t.Fatalf("two %s objects named %s", kind, name)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s named %s to patch", kind, name)
	}
	return found
}

// splitPointer splits a JSON pointer (RFC 6901) into its reference tokens.
func splitPointer(p string) []string {
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		parts[i] = unescape.Replace(parts[i])
	}
	return parts
}

// patchAdd applies a JSON patch "add" (RFC 6902) of value at path to doc
// and returns the new doc (a slice may have grown).
func patchAdd(doc any, path []string, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	switch d := doc.(type) {
	case map[string]any:
		if len(path) == 1 {
			d[path[0]] = value
			return d, nil
		}
		child, ok := d[path[0]]
		if !ok {
			return nil, fmt.Errorf("no member %q", path[0])
		}
		v, err := patchAdd(child, path[1:], value)
		if err != nil {
			return nil, err
		}
		d[path[0]] = v
		return d, nil
	case []any:
		if len(path) == 1 && path[0] == "-" {
			return append(d, value), nil
		}
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(d) {
			return nil, fmt.Errorf("no element %q in an array of %d", path[0], len(d))
		}
		if len(path) == 1 {
			return slices.Insert(d, i, value), nil
		}
		v, err := patchAdd(d[i], path[1:], value)
		if err != nil {
			return nil, err
		}
		d[i] = v
		return d, nil
	}
	return nil, fmt.Errorf("cannot descend into %T at %q", doc, path[0])
}

// convert decodes a generic YAML object into a typed view of it.
func convert(t *testing.T, obj any, dst any) {
	t.Helper()
	raw, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, dst); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// k8sObject is the part of a Service, StatefulSet, Job or CronJob the
// test reads.
type k8sObject struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Replicas    *int
		ServiceName string `yaml:"serviceName"`
		ClusterIP   string `yaml:"clusterIP"`
		Selector    map[string]any
		Ports       []struct {
			Name       string
			Port       int
			TargetPort any `yaml:"targetPort"`
		}
		Template    podTemplate
		JobTemplate struct {
			Spec struct{ Template podTemplate }
		} `yaml:"jobTemplate"`
	}
}

type podTemplate struct {
	Metadata struct{ Labels map[string]string }
	Spec     struct {
		// TerminationGracePeriodSeconds is Kubernetes' bound on a pod's
		// stop after SIGTERM (default 30).
		TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
		Containers                    []container
		InitContainers                []container `yaml:"initContainers"`
		Volumes                       []struct {
			Name   string
			Secret *struct {
				SecretName string `yaml:"secretName"`
			}
		}
	}
}

type container struct {
	Name, Image   string
	Command, Args []string
	Env           []struct {
		Name, Value string
		ValueFrom   *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	Ports []struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct{ Requests, Limits map[string]string }
	VolumeMounts   []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string
		Port any
	} `yaml:"httpGet"`
}

// deployFound is what checkObjects learned for the cross-checks.
type deployFound struct {
	serveDatasets []string // dataset URLs the gateways serve
	packDsts      []string // where pack Jobs write
}

// checkObjects checks one rendering. images are the image names its
// kustomization rewrites.
func checkObjects(t *testing.T, objs []map[string]any, images []string) deployFound {
	t.Helper()
	var found deployFound
	services := map[string]k8sObject{}
	var workloads []k8sObject
	for _, o := range objs {
		var obj k8sObject
		convert(t, o, &obj)
		switch obj.Kind {
		case "Service":
			services[obj.Metadata.Name] = obj
		case "StatefulSet", "Deployment", "DaemonSet", "Job", "ReplicaSet":
			workloads = append(workloads, obj)
		case "CronJob":
			obj.Spec.Template = obj.Spec.JobTemplate.Spec.Template
			workloads = append(workloads, obj)
		}
	}
	for _, w := range workloads {
		pod := w.Spec.Template
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			args, ok := brandCommand(t, c)
			if !ok {
				continue
			}
			if !slices.Contains(images, c.Image) {
				t.Errorf("%s %s: image %q is not in the kustomization's images: it would be pulled as is", w.Kind, w.Metadata.Name, c.Image)
			}
			podNames := []string{w.Metadata.Name + "-test"}
			if w.Kind == "StatefulSet" {
				if w.Spec.Replicas == nil {
					t.Fatalf("StatefulSet %s: no replicas", w.Metadata.Name)
				}
				podNames = nil
				for k := range *w.Spec.Replicas {
					podNames = append(podNames, fmt.Sprintf("%s-%d", w.Metadata.Name, k))
				}
			}
			for k, podName := range podNames {
				expanded := expandEnv(t, c, podName, args)
				if err := checkBrandArgs(t, expanded); err != nil {
					t.Errorf("%s %s, pod %s, container %s: %v", w.Kind, w.Metadata.Name, podName, c.Name, err)
					continue
				}
				switch expanded[0] {
				case "serve":
					urls := checkServe(t, w, pod, c, services, expanded[1:], k)
					if k == 0 {
						found.serveDatasets = append(found.serveDatasets, urls...)
					}
				case "pack":
					if dst, ok := flagValue(expanded[1:], "dst"); ok && k == 0 {
						found.packDsts = append(found.packDsts, dst)
					}
				}
			}
		}
	}
	return found
}

// brandCommand returns the arguments brand is run with in c, if c runs
// brand: either the image's entrypoint (brand, checkEntrypoint) with c's
// args, or a command naming the binary.
func brandCommand(t *testing.T, c container) ([]string, bool) {
	t.Helper()
	if len(c.Command) > 0 {
		if path.Base(c.Command[0]) == "brand" {
			return append(slices.Clone(c.Command[1:]), c.Args...), true
		}
		if strings.Contains(strings.Join(c.Command, " "), "brand") {
			t.Errorf("container %s runs brand through %q, whose arguments this test cannot check (and the image has no shell)", c.Name, c.Command)
		}
		return nil, false
	}
	image := c.Image
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return c.Args, path.Base(image) == "brand"
}

// envRef is a Kubernetes variable reference in a command or its arguments.
var envRef = regexp.MustCompile(`\$\(([^)]*)\)`)

// expandEnv expands $(VAR) in args as the kubelet does for a pod named
// podName in testNamespace, from c's env (literal values and the downward
// API's metadata.name and metadata.namespace). A reference to anything
// else is an error: Kubernetes would pass it to brand unexpanded.
func expandEnv(t *testing.T, c container, podName string, args []string) []string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = testNamespace
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, "$$") {
			t.Errorf("container %s: %q escapes a $; this test does not expand escapes", c.Name, a)
		}
		out[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := vars[name]
			if !ok {
				t.Errorf("container %s: %q refers to $(%s), which its env does not define from a value, the pod's name or its namespace", c.Name, a, name)
			}
			return v
		})
	}
	return out
}

// flagValue returns the value of --name (or -name) in a command line that
// parsed, in either the "--name value" or "--name=value" form.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkServe checks a brand serve container of pod ordinal k of workload w
// (args after "serve", already expanded) and returns the dataset URLs it
// serves.
func checkServe(t *testing.T, w k8sObject, pod podTemplate, c container, services map[string]k8sObject, args []string, k int) []string {
	t.Helper()
	where := fmt.Sprintf("%s %s, pod %d", w.Kind, w.Metadata.Name, k)
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs, defaultListen) // what the container gets without --listen
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	specs, err := f.specs()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var urls []string
	for _, s := range specs {
		urls = append(urls, s.URL)
	}

	listenHost, listenPort, err := net.SplitHostPort(f.listen)
	if err != nil {
		t.Fatalf("%s: --listen %q: %v", where, f.listen, err)
	}
	if ip := net.ParseIP(listenHost); listenHost == "localhost" || ip != nil && ip.IsLoopback() {
		// brand serve's default: the probes and the Service reach the
		// pod's own address, which a loopback listener refuses.
		t.Errorf("%s: brand serve listens on %s, loopback alone: the kubelet's probes and the Service cannot reach it (give --listen :8080)", where, f.listen)
	}
	for _, p := range []struct {
		name, want string
		probe      *probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", where, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.want {
			t.Errorf("%s: %s probe on %s, want %s", where, p.name, p.probe.HTTPGet.Path, p.want)
		}
		if got := containerPort(c, p.probe.HTTPGet.Port); got != listenPort {
			t.Errorf("%s: %s probe on port %v (%s), brand listens on %s", where, p.name, p.probe.HTTPGet.Port, got, listenPort)
		}
	}
	checkMemory(t, where, c, f)
	if f.security.tokenFile != "" && !mountedFromSecret(c, pod, f.security.tokenFile) {
		t.Errorf("%s: --auth-token-file %s is not in a volume mounted from a Secret", where, f.security.tokenFile)
	}

	source := f.cluster.peers + f.cluster.peersFile + f.cluster.peersDNS
	if w.Kind != "StatefulSet" {
		if source != "" {
			t.Errorf("%s: a %s has no stable pod names to list as members", where, w.Kind)
		}
		return urls
	}
	if f.cluster.peersDNS == "" || f.cluster.peers != "" || f.cluster.peersFile != "" {
		t.Fatalf("%s: a StatefulSet lists its members with --peers-dns alone, so that kubectl scale is the whole resize", where)
	}
	if f.security.tokenFile != "" && (f.cluster.secretFile == "" || !mountedFromSecret(c, pod, f.cluster.secretFile)) {
		t.Errorf("%s: a cluster with --auth-token-file needs --peer-secret-file in a volume mounted from a Secret", where)
	}
	cc, err := f.cluster.layout()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	// A node that leaves hands its chunks over, then drains, within
	// Kubernetes' grace period, and waits at least as long as the nodes
	// gaining its chunks may take to load them.
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := f.cluster.leave + f.shutdownTimeout; grace < need {
		t.Errorf("%s: terminationGracePeriodSeconds %s is shorter than --leave-timeout %s and --shutdown-timeout %s", where, grace, f.cluster.leave, f.shutdownTimeout)
	}
	if f.cluster.leave < f.cluster.flipTimeout {
		t.Errorf("%s: --leave-timeout %s is shorter than --membership-flip-timeout %s: a leaving node would stop before the nodes gaining its chunks are done", where, f.cluster.leave, f.cluster.flipTimeout)
	}
	svc, ok := services[w.Spec.ServiceName]
	if !ok || svc.Spec.ClusterIP != "None" {
		t.Fatalf("%s: serviceName %q is not a headless Service of the manifests (clusterIP: None), so pods have no DNS names", where, w.Spec.ServiceName)
	}
	for key, v := range svc.Spec.Selector {
		if pod.Metadata.Labels[key] != fmt.Sprint(v) {
			t.Errorf("%s: Service %s selects %s=%v, which the pods are not labelled with", where, svc.Metadata.Name, key, v)
		}
	}
	// The SRV records of the port named http list the pods: that port
	// must reach brand.
	srvPort := 0
	for _, p := range svc.Spec.Ports {
		if p.Name == "http" {
			srvPort = p.Port
			if got := containerPort(c, p.TargetPort); got != listenPort {
				t.Errorf("%s: Service %s's port http targets %v (%s), brand listens on %s", where, svc.Metadata.Name, p.TargetPort, got, listenPort)
			}
		}
	}
	if srvPort == 0 {
		t.Fatalf("%s: Service %s has no port named http, whose SRV records --peers-dns reads", where, svc.Metadata.Name)
	}
	svcDNS := fmt.Sprintf("%s.%s.svc", svc.Metadata.Name, testNamespace)
	if d := f.cluster.peersDNS; d != svcDNS && !strings.HasPrefix(d, svcDNS+".") {
		t.Errorf("%s: --peers-dns %s is not the Service %s in the pod's namespace (%s…)", where, d, svc.Metadata.Name, svcDNS)
	}
	// kubectl scale to any size: the records Kubernetes would publish
	// for that many pods list this pod (if it runs) under the URL it
	// advertises, and nothing else needs to change.
	for _, replicas := range []int{*w.Spec.Replicas, 1, 7} {
		records := fakeSRV{}
		name := "_http._tcp." + f.cluster.peersDNS
		for j := range replicas {
			records[name] = append(records[name], &net.SRV{Target: fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local.", w.Metadata.Name, j, svc.Metadata.Name, testNamespace), Port: uint16(srvPort)})
		}
		dns, ok := cc.Members.(membership.DNS)
		if !ok {
			t.Fatalf("%s: --peers-dns gave a %T", where, cc.Members)
		}
		dns.Resolver = records
		listed, err := dns.List(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		ms, err := cluster.NewMembership(listed)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if in := ms.Index(cc.Advertise) >= 0; in != (k < replicas) || ms.Len() != replicas {
			t.Errorf("%s: scaled to %d replicas, the members are %v; this pod advertises %s", where, replicas, ms.Members(), cc.Advertise)
		}
	}
	return urls
}

// fakeSRV answers SRV lookups from a table of full names, as a cluster's
// DNS would for a headless Service.
type fakeSRV map[string][]*net.SRV

func (f fakeSRV) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	full := name
	if service != "" || proto != "" {
		full = "_" + service + "._" + proto + "." + name
	}
	if r, ok := f[full]; ok {
		return full, r, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: full, IsNotFound: true}
}

// checkMemory holds the container's memory to the cache it is given:
// brand serve allocates and touches the whole cache before it is ready and
// holds the rest of its memory to its budget (--memory-limit: a size, or
// auto, the cache and the parts beside it), so a limit below that is an
// OOM kill in the first epoch; and the request must equal the limit, or
// the scheduler may place the pod where that memory is not.
func checkMemory(t *testing.T, where string, c container, f serveFlags) {
	t.Helper()
	limit, err := parseQuantity(c.Resources.Limits["memory"])
	if err != nil {
		t.Errorf("%s: memory limit: %v", where, err)
		return
	}
	need := int64(f.cacheSize)
	switch f.memoryLimit {
	case "auto":
		need += f.besideCache()
	case "off":
	default:
		var b cli.ByteSize
		if err := b.Set(f.memoryLimit); err != nil {
			t.Errorf("%s: --memory-limit: %v", where, err)
		}
		need = max(need, int64(b))
	}
	if limit < need {
		t.Errorf("%s: memory limit %s (%d bytes) is below the cache and Go's heap beside it (%d bytes)", where, c.Resources.Limits["memory"], limit, need)
	}
	if req := c.Resources.Requests["memory"]; req != c.Resources.Limits["memory"] {
		t.Errorf("%s: memory request %q differs from the limit %q: the cache is allocated at start", where, req, c.Resources.Limits["memory"])
	}
}

// containerPort resolves a probe's port (a number or a port name) to the
// number, as a string.
func containerPort(c container, port any) string {
	if name, ok := port.(string); ok {
		for _, p := range c.Ports {
			if p.Name == name {
				return strconv.Itoa(p.ContainerPort)
			}
		}
	}
	return fmt.Sprint(port)
}

func mountedFromSecret(c container, pod podTemplate, file string) bool {
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}

// quantity is a Kubernetes resource quantity in the forms a memory figure
// takes: an integer with an optional binary or decimal suffix.
var quantity = regexp.MustCompile(`^(\d+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)

var quantityScale = map[string]int64{
	"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
	"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
}

func parseQuantity(s string) (int64, error) {
	m := quantity.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a quantity such as 8704Mi or 9Gi", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("quantity %q: %w", s, err)
	}
	scale := quantityScale[m[2]]
	if n > (1<<63-1)/scale {
		return 0, fmt.Errorf("quantity %q is too large", s)
	}
	return n * scale, nil
}
