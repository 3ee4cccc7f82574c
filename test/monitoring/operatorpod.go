package monitoring

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// operatorPod is one of the operator's StatefulSet pods, laid out under root: what the
// kubelet and the config-reloader init container would have done before its main container
// starts.
type operatorPod struct {
	args       []string // the main container's, $(VARS) expanded and paths rewritten
	configFile string   // the configuration the reloader wrote, paths rewritten
}

// preparePod waits for StatefulSet sts in ns (the operator's), then writes the volumes its
// main container and its init-config-reloader mount under root, runs the reloader's step and
// returns the main container's arguments.
func preparePod(ctx context.Context, c *cluster.Cluster, root, ns, sts, container string) (*operatorPod, error) {
	set, err := waitObject(ctx, "StatefulSet "+ns+"/"+sts, func(ctx context.Context) (*appsv1.StatefulSet, error) {
		return c.Client().AppsV1().StatefulSets(ns).Get(ctx, sts, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	spec := set.Spec.Template.Spec
	main := findContainer(spec.Containers, container)
	reloader := findContainer(spec.InitContainers, "init-config-reloader")
	if main == nil || reloader == nil {
		return nil, fmt.Errorf("StatefulSet %s/%s has no container %q or no init-config-reloader", ns, sts, container)
	}
	podName := sts + "-0"
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	// The mount paths, longest first, so that a nested mount is rewritten before its parent.
	var mountPaths []string
	seen := map[string]bool{}
	for _, ct := range []*corev1.Container{reloader, main} {
		for _, vm := range ct.VolumeMounts {
			if seen[vm.MountPath] {
				continue
			}
			seen[vm.MountPath] = true
			v, ok := volumes[vm.Name]
			if !ok {
				return nil, fmt.Errorf("%s: mount %s of unknown volume %s", sts, vm.MountPath, vm.Name)
			}
			if err := writeVolume(ctx, c, ns, v, vm, filepath.Join(root, vm.MountPath)); err != nil {
				return nil, fmt.Errorf("%s: volume %s at %s: %w", sts, vm.Name, vm.MountPath, err)
			}
			mountPaths = append(mountPaths, vm.MountPath)
		}
	}
	rewrite := pathRewriter(root, mountPaths)

	// The config-reloader's init step: decompress the generated configuration and substitute
	// its $(VARS) from the reloader's environment.
	in, out := flagValue(reloader.Args, "config-file"), flagValue(reloader.Args, "config-envsubst-file")
	if in == "" || out == "" {
		return nil, fmt.Errorf("%s: init-config-reloader args %q name no --config-file/--config-envsubst-file", sts, reloader.Args)
	}
	raw, err := os.ReadFile(filepath.Join(root, in))
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(in, ".gz") {
		if raw, err = gunzip(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", in, err)
		}
	}
	cfg := rewrite(expandVars(string(raw), envOf(reloader, podName, c.NodeIP())))
	pod := &operatorPod{configFile: filepath.Join(root, out)}
	if err := os.WriteFile(pod.configFile, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	env := envOf(main, podName, c.NodeIP())
	for _, a := range main.Args {
		pod.args = append(pod.args, rewrite(expandVars(a, env)))
	}
	return pod, nil
}

// preparePodWhen is preparePod, repeated every second until ready (if set) accepts the text of
// the files laid out under root or ctx ends; the error then says what ready last said.
func preparePodWhen(ctx context.Context, c *cluster.Cluster, root, ns, sts, container string, ready func(files string) error) (*operatorPod, error) {
	for {
		// Laid out afresh each time: a subPath mount is a file where a directory may be made.
		if err := os.RemoveAll(root); err != nil {
			return nil, err
		}
		pod, err := preparePod(ctx, c, root, ns, sts, container)
		if err != nil || ready == nil {
			return pod, err
		}
		files, err := readTree(root)
		if err != nil {
			return nil, err
		}
		notReady := ready(files)
		if notReady == nil {
			return pod, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the operator's output for %s/%s: %w (%w)", ns, sts, notReady, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// readTree is the text of every regular file under root, each after its path.
func readTree(root string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", path, data)
		return nil
	})
	return b.String(), err
}

// pathRewriter moves every mount path that starts a path (not one inside another path, as
// /prometheus inside /etc/prometheus) under root, in one pass.
func pathRewriter(root string, mountPaths []string) func(string) string {
	sorted := slices.Clone(mountPaths)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	alts := make([]string, len(sorted))
	for i, p := range sorted {
		alts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_./-])(` + strings.Join(alts, "|") + `)`)
	return func(s string) string {
		if len(alts) == 0 {
			return s
		}
		return re.ReplaceAllString(s, "${1}"+strings.ReplaceAll(root, "$", "$$")+"${2}")
	}
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// writeVolume writes what the kubelet would mount at dir: a Secret's or ConfigMap's keys (or
// its items), a projected volume's sources, or an empty directory.
func writeVolume(ctx context.Context, c *cluster.Cluster, ns string, v corev1.Volume, vm corev1.VolumeMount, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch {
	case v.EmptyDir != nil:
		return nil
	case v.Secret != nil:
		return writeSecret(ctx, c, ns, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, vm.SubPath, dir)
	case v.ConfigMap != nil:
		return writeConfigMap(ctx, c, ns, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, vm.SubPath, dir)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.Secret != nil:
				err = writeSecret(ctx, c, ns, s.Secret.Name, s.Secret.Items, s.Secret.Optional, vm.SubPath, dir)
			case s.ConfigMap != nil:
				err = writeConfigMap(ctx, c, ns, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, vm.SubPath, dir)
			default:
				err = fmt.Errorf("unsupported projected source %+v", s)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unsupported volume source %+v", v.VolumeSource)
}

func writeSecret(ctx context.Context, c *cluster.Cluster, ns, name string, items []corev1.KeyToPath, optional *bool, subPath, dir string) error {
	s, err := waitObject(ctx, "Secret "+ns+"/"+name, func(ctx context.Context) (*corev1.Secret, error) {
		return c.Client().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	return writeKeys(s.Data, items, subPath, dir)
}

func writeConfigMap(ctx context.Context, c *cluster.Cluster, ns, name string, items []corev1.KeyToPath, optional *bool, subPath, dir string) error {
	cm, err := waitObject(ctx, "ConfigMap "+ns+"/"+name, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return c.Client().CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return writeKeys(data, items, subPath, dir)
}

// writeKeys writes each key (or each item's key at its path) under dir; with a subPath, the
// mount is that one file, written at dir itself.
func writeKeys(data map[string][]byte, items []corev1.KeyToPath, subPath, dir string) error {
	paths := map[string]string{}
	if len(items) == 0 {
		for k := range data {
			paths[k] = k
		}
	}
	for _, it := range items {
		paths[it.Key] = it.Path
	}
	for key, p := range paths {
		b, ok := data[key]
		if !ok {
			return fmt.Errorf("no key %q", key)
		}
		target := filepath.Join(dir, p)
		if subPath != "" {
			if p != subPath {
				continue
			}
			// The mount is the file: dir was made as a directory for it.
			if err := os.Remove(dir); err != nil {
				return err
			}
			target = dir
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandVars replaces $(NAME) by env[NAME], as the kubelet does in arguments and the
// config-reloader in configurations; unknown names stay as they are.
func expandVars(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[varRef.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// envOf is a container's environment as the kubelet would give it to the StatefulSet's
// first pod, which runs here at the node's address.
func envOf(ct *corev1.Container, podName, podIP string) map[string]string {
	env := map[string]string{}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandVars(e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		}
	}
	return env
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// listenAddr is the host:port a client inside the namespace reaches the --name=[host]:port
// flag of args at (def if absent); an empty host listens everywhere, loopback included.
func listenAddr(args []string, name, def string) string {
	v := flagValue(args, name)
	if v == "" {
		v = def
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return v
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func splitURLHostPort(raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
