package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// TestDeployManifestsOnRealCluster applies the kustomize base (deploy/) to the real API
// server, runs its exporter and remediator pods from the project's image on the real kubelet
// under the manifests' ServiceAccounts, RBAC and security contexts, and follows one
// over-limit alert through them to an eviction (install_test.go).
//
// Patched, because this cluster needs it (nothing else): the image (local, pullPolicy
// Never), the kubelet root hostPath (the cluster's --root-dir), and the API server address
// in the pods' environment (see deployAPIEnv).
func TestDeployManifestsOnRealCluster(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 10*time.Minute)
	defer cancel()

	objs, err := deploy.BaseObjects()
	if err != nil {
		t.Fatal(err)
	}
	secretObjs, err := deploy.DecodeFile(deploy.WebhookSecretExample)
	if err != nil {
		t.Fatal(err)
	}
	secret := secretObjs[0].(*corev1.Secret)
	token := deployToken(t)
	secret.StringData["token"] = token // "replace the placeholder", as docs/deploy.md says
	objs = append(objs, secret)
	apiEnv := deployAPIEnv(t, c)
	in := installObjects(ctx, t, c, install{ns: deploy.Namespace, exporter: "emptydir-exporter", remediator: "emptydir-remediator", token: token},
		objs, func(spec *corev1.PodSpec) {
			apiEnv(spec)
			for i := range spec.Containers {
				spec.Containers[i].Image = deployImage
				spec.Containers[i].ImagePullPolicy = corev1.PullNever
			}
			localizeNodePaths(c, spec)
		})
	ns := in.ns
	// What the remediator makes as it runs (its Lease, its ledger at the flags' default names)
	// goes with the install, like the applied objects: the README's Helm release, named like
	// the base, later starts in this namespace as a fresh install would.
	t.Cleanup(func() {
		_ = c.Client().CoordinationV1().Leases(ns).Delete(context.Background(), "emptydir-remediator", metav1.DeleteOptions{})
		_ = c.Client().CoreV1().ConfigMaps(ns).Delete(context.Background(), "emptydir-remediator-ledger", metav1.DeleteOptions{})
	})
	seed := in.startSeed(ctx, t, "dep")
	expPod, remPods := in.createPods(ctx, t)
	expPod = in.checkExporter(ctx, t, expPod, seed)

	// The control: the same pod without DAC_READ_SEARCH and without mount propagation
	// (other labels, so that the remediator's exporter discovery never picks it). It shows
	// that each of the two settings is what makes the numbers complete.
	ds, err := c.Client().AppsV1().DaemonSets(ns).Get(ctx, in.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	control := ds.Spec.Template.DeepCopy()
	control.Labels = map[string]string{"app.kubernetes.io/name": "emptydir-exporter-control"}
	control.Spec.Containers[0].SecurityContext.Capabilities.Add = nil
	none := corev1.MountPropagationNone
	for i := range control.Spec.Containers[0].VolumeMounts {
		control.Spec.Containers[0].VolumeMounts[i].MountPropagation = &none
	}
	ctlPod := deployWaitReady(ctx, t, c, deployPodFromTemplate(ctx, t, c, ns, "emptydir-exporter-control-"+framework.RandSuffix(), *control, daemonSetOwner(ds)))
	expURL, ctlURL := deployExporterURL(expPod), deployExporterURL(ctlPod)
	framework.Eventually(t, 60*time.Second, time.Second, "without DAC_READ_SEARCH the 0700 directory is unreadable", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, ctlURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := framework.Sample(fams, "emptydir_used_bytes", seed.labels)
		unreadable, _ := framework.Sample(fams, "emptydir_unreadable_entries", seed.labels)
		return ok && unreadable > 0 && int64(used) < seed.used, fmt.Sprintf("used=%v (found %v, du %d) unreadable=%v", used, ok, seed.used, unreadable)
	})

	// HostToContainer propagation: a medium: Memory volume of a pod started after the
	// exporters is a tmpfs the kubelet mounts later on the host. The manifest's exporter sees
	// its data; the control sees only the empty directory under it.
	seedNS := seed.pod.Namespace
	mem := framework.RunPod(ctx, t, c, memoryPod(c, seedNS, "mem-after-exporter"))
	if _, stderr, err := c.ExecInPod(ctx, seedNS, mem.Name, "test2", "dd", "if=/dev/zero", "of=/mem/f", "bs=1K", "count=2000"); err != nil {
		t.Fatalf("dd into the memory volume: %v (%s)", err, stderr)
	}
	wantMem := framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(mem.UID), "mem"))
	memLabels := map[string]string{"namespace": seedNS, "pod": mem.Name, "uid": string(mem.UID), "volume": "mem", "medium": "memory"}
	framework.Eventually(t, 60*time.Second, time.Second, "the exporter sees a tmpfs mounted after it started", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, expURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := framework.Sample(fams, "emptydir_used_bytes", memLabels)
		ctl, err := framework.Scrape(ctx, c, ctlURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		ctlUsed, ctlOK := framework.Sample(ctl, "emptydir_used_bytes", memLabels)
		return ok && int64(used) == wantMem && wantMem >= 2048000 && ctlOK && ctlUsed < 2048000,
			fmt.Sprintf("used=%v (found %v, du %d); control without propagation used=%v (found %v)", used, ok, wantMem, ctlUsed, ctlOK)
	})
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, ctlPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	in.evictSeed(ctx, t, remPods, seed)

	// --- components/kubelet-source: the kubelet authorizes /stats/summary as nodes/stats ---
	// (after the SubjectAccessReviews above, which check that the base alone does not grant it)
	rbacObjs, err := deploy.DecodeFile("components/kubelet-source/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deployApply(ctx, t, c, rbacObjs)
	expiry := int64(600)
	tr, err := c.Client().CoreV1().ServiceAccounts(ns).CreateToken(ctx, in.exporter,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := c.HTTPClient(&tls.Config{RootCAs: c.CAPool()})
	kubeletGet := func(path string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.KubeletURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := kubelet.Do(req)
		if err != nil {
			t.Fatalf("GET kubelet %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, framework.Tail(string(b), 300)
	}
	// only_cpu_and_memory: the full summary fails on this cluster (localStorageCapacityIsolation
	// off, see docs/design.md); the authorization is the same.
	if code, body := kubeletGet("/stats/summary?only_cpu_and_memory=true"); code != http.StatusOK {
		t.Errorf("exporter token with components/kubelet-source: kubelet /stats/summary %d %s, want 200", code, body)
	}
	if code, body := kubeletGet("/pods"); code != http.StatusForbidden {
		t.Errorf("exporter token: kubelet /pods %d %s, want 403 (no nodes/proxy)", code, body)
	}
}

// localizeNodePaths points the hostPath volumes of the shipped manifests at this cluster's
// directories: the kubelet's root and pod logs (mounted where the manifests say), and containerd's
// task directory, snapshotter root and CRI containers directory. The last two are mounted at the node's
// path (the mount table names the node's paths), so their mounts and flags move with them. The change signal's
// --cgroup.root stays auto: the exporter finds this kubelet's root on its own pod (calibration),
// which the change marks read prove (checkExporter).
func localizeNodePaths(c *cluster.Cluster, spec *corev1.PodSpec) {
	// Directories the manifests mount at the same path on the node and in the container, and name
	// in a flag: all three move (else the hostPath creates the default directory on this host).
	const snapshotter = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
	const criContainers = "/var/lib/containerd/io.containerd.grpc.v1.cri/containers"
	samePath := map[string]string{snapshotter: c.SnapshotterRoot(), criContainers: c.CRIContainersDir()}
	for i := range spec.Volumes {
		hp := spec.Volumes[i].HostPath
		if hp == nil {
			continue
		}
		for from, to := range map[string]string{"/var/lib/kubelet": c.KubeletRootDir(), "/var/log/pods": c.PodLogsDir(),
			"/run/containerd/io.containerd.runtime.v2.task": c.ContainerdTaskDir(), snapshotter: c.SnapshotterRoot(), criContainers: c.CRIContainersDir()} {
			if rest, ok := strings.CutPrefix(hp.Path, from); ok {
				hp.Path = to + rest
				break
			}
		}
	}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		for j := range ct.VolumeMounts {
			if to, ok := samePath[ct.VolumeMounts[j].MountPath]; ok {
				ct.VolumeMounts[j].MountPath = to
			}
		}
		for j, a := range ct.Args {
			for from, to := range samePath {
				if rest, ok := strings.CutPrefix(a, "--containerd.snapshotter-root="+from); ok {
					ct.Args[j] = "--containerd.snapshotter-root=" + to + rest
				}
				if rest, ok := strings.CutPrefix(a, "--containerd.cri-containers-dir="+from); ok {
					ct.Args[j] = "--containerd.cri-containers-dir=" + to + rest
				}
			}
		}
	}
}
