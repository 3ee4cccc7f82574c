// Package cluster starts a real single-node Kubernetes (etcd, kube-apiserver, containerd or
// CRI-O, kubelet) for tests, entirely inside a network namespace it creates, and tears all of it
// down again. The tests themselves stay in the host namespace and reach the cluster through
// a dialer that opens sockets inside the namespace. See docs/local-cluster.md.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	serviceClusterIP   = "10.0.0.1"
	serviceClusterCIDR = "10.0.0.0/24"
	podSubnet          = "10.214.0.0/24"
	apiserverPort      = 6443
	kubeletPort        = 10250
	etcdClientURL      = "http://127.0.0.1:2379"
)

// Options configures Start. The zero value is usable when K8S_BIN_DIR is set.
type Options struct {
	// BinDir holds kube-apiserver and kubelet; default $K8S_BIN_DIR.
	BinDir string
	// WorkDir holds every file of the cluster; default a new temp dir that Stop removes.
	// A given WorkDir is emptied of mounts but kept, with its logs.
	WorkDir string
	// LocalStorageCapacityIsolation is the kubelet setting of the same name; with false the
	// kubelet neither enforces emptyDir sizeLimit nor serves /stats/summary.
	LocalStorageCapacityIsolation bool
	// VolumeStatsAggPeriod is the kubelet's volume stats refresh period; 0 = kubelet default (1m).
	VolumeStatsAggPeriod time.Duration
	// Logf receives progress lines (t.Logf, log.Printf); nil = silent.
	Logf func(format string, args ...any)
	// NodeName overrides the node's name; default the namespace name (edg-<random>).
	NodeName string
	// KubeletConfig is merged over the generated KubeletConfiguration (top-level keys).
	KubeletConfig map[string]any
	// ExtraAPIServerArgs and ExtraKubeletArgs are appended to the command lines.
	ExtraAPIServerArgs []string
	ExtraKubeletArgs   []string
	// ReadyTimeout bounds each wait of Start; default 2m.
	ReadyTimeout time.Duration
	// Layout puts the kubelet's and containerd's directories and the cgroup root at fixed host
	// paths (a distribution's); nil: all below WorkDir, and a cgroup root of the cluster's own.
	Layout *Layout
	// Runtime is the node's container runtime: RuntimeContainerd (the default, "") or
	// RuntimeCRIO, built by test/crio/build.sh.
	Runtime string
	// CRIODir holds crio, pinns and copyimg (test/crio/build.sh); default $CRIO_DIR.
	CRIODir string
	// KeepLogs copies WorkDir/logs to a directory outside WorkDir on Stop (also set by
	// EMPTYDIR_GUARD_KEEP_LOGS=1). Logs are always kept when Start fails.
	KeepLogs bool
}

// Cluster is a running single-node cluster. All methods are safe for concurrent use.
type Cluster struct {
	opts       Options
	binDir     string
	workDir    string
	ownWorkDir bool
	netnsName  string
	netnsPath  string
	netnsIno   uint64
	nodeName   string
	nodeIP     net.IP
	cgroupName string
	pki        *pki

	runtime        string
	crioDir        string
	containerdSock string
	crioSock       string
	kubeconfig     string
	kubeletRoot    string
	podLogsDir     string
	ctrdRoot       string
	ctrdState      string
	runcRoot       string
	layoutCreated  []string // the layout's directories Start created, which Stop removes
	layoutLock     *os.File
	cniNetnsBefore map[string]bool
	containerIDs   []string // seen at Stop, to find their CNI cache files

	mu         sync.Mutex
	etcd       *proc
	apiserver  *proc
	containerd *proc
	crio       *proc
	kubelet    *proc
	extra      []*proc

	restConfig *rest.Config
	client     kubernetes.Interface

	registryMu   sync.Mutex // held while the registry starts: tests of one shared cluster share it
	registryHost string

	stopOnce sync.Once
	stopErr  error
}

// Start brings up etcd, kube-apiserver, the runtime (containerd or CRI-O) and the kubelet and
// waits until the node is Ready. On any error everything already started is torn down before
// returning.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	t0 := time.Now()
	if opts.BinDir == "" {
		opts.BinDir = os.Getenv("K8S_BIN_DIR")
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if os.Getenv("EMPTYDIR_GUARD_KEEP_LOGS") == "1" {
		opts.KeepLogs = true
	}
	switch opts.Runtime {
	case "", RuntimeContainerd:
		opts.Runtime = RuntimeContainerd
	case RuntimeCRIO:
		if opts.CRIODir == "" {
			opts.CRIODir = os.Getenv(crioDirEnv)
		}
	default:
		return nil, fmt.Errorf("cluster: unknown runtime %q (want %q or %q)", opts.Runtime, RuntimeContainerd, RuntimeCRIO)
	}
	if err := preflight(opts); err != nil {
		return nil, err
	}
	// A leftover that cannot be fully removed must not block new clusters: report it only.
	if names, err := CleanupStale(opts.Logf); err != nil && opts.Logf != nil {
		opts.Logf("cluster: cleaning up clusters of dead test processes %v: %v", names, err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	name := "edg-" + hex.EncodeToString(suffix)
	c = &Cluster{
		opts:       opts,
		binDir:     opts.BinDir,
		runtime:    opts.Runtime,
		crioDir:    opts.CRIODir,
		netnsName:  name,
		netnsPath:  "/run/netns/" + name,
		nodeName:   opts.NodeName,
		nodeIP:     net.ParseIP("10.213.0.2").To4(),
		cgroupName: name,
	}
	if c.nodeName == "" {
		c.nodeName = name
	}
	if opts.WorkDir == "" {
		if c.workDir, err = os.MkdirTemp("", name+"-"); err != nil {
			return nil, err
		}
		c.ownWorkDir = true
	} else {
		c.workDir, _ = filepath.Abs(opts.WorkDir)
		if err := os.MkdirAll(c.workDir, 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			logs := c.saveLogs()
			c.logf("start failed after %s, tearing down (logs kept in %s)", time.Since(t0).Round(time.Millisecond), logs)
			_ = c.Stop()
			err = fmt.Errorf("cluster start: %w (component logs: %s)", err, logs)
			c = nil
		}
	}()
	c.kubeletRoot = filepath.Join(c.workDir, "kubelet")
	c.podLogsDir = filepath.Join(c.workDir, "pod-logs")
	c.ctrdRoot = filepath.Join(c.workDir, "containerd", "root")
	c.ctrdState = filepath.Join(c.workDir, "containerd", "state")
	if l := opts.Layout; l != nil {
		if err := c.useLayout(ctx, l); err != nil {
			return c, err
		}
	}
	if err := c.writeState(); err != nil {
		return c, fmt.Errorf("record cluster state: %w", err)
	}
	c.cniNetnsBefore = listCNINetns()
	c.containerdSock = filepath.Join(c.workDir, "containerd", "containerd.sock")
	c.crioSock = filepath.Join(c.workDir, "crio", "crio.sock")
	c.kubeconfig = filepath.Join(c.workDir, "admin.kubeconfig")
	c.runcRoot = filepath.Join(c.workDir, "runc")
	c.logf("cluster %s: work dir %s, node IP %s", name, c.workDir, c.nodeIP)

	if err := createNetns(ctx, name, c.nodeIP); err != nil {
		return c, err
	}
	if c.netnsIno, err = inodeOf(c.netnsPath); err != nil {
		return c, err
	}
	if err := c.createCgroups(); err != nil {
		return c, err
	}
	if c.pki, err = newPKI(filepath.Join(c.workDir, "pki"), c.nodeName, c.nodeIP); err != nil {
		return c, fmt.Errorf("pki: %w", err)
	}
	if err := c.writeKubeconfigs(); err != nil {
		return c, err
	}
	c.restConfig = &rest.Config{
		Host:            c.APIServerURL(),
		BearerToken:     c.pki.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		Dial:            c.DialContext,
		QPS:             50,
		Burst:           100,
		// No Timeout: it would cut informers' long-running watches.
	}
	if c.client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return c, err
	}

	// etcd and the runtime do not depend on each other: start both, then the API server.
	if err := c.startEtcd(); err != nil {
		return c, err
	}
	if c.runtime == RuntimeCRIO {
		// The images are loaded into CRI-O's storage before it starts.
		err = c.startCRIO(ctx)
	} else {
		err = c.startContainerd()
	}
	if err != nil {
		return c, err
	}
	if err := c.waitEtcd(ctx); err != nil {
		return c, err
	}
	c.logf("etcd ready after %s", time.Since(t0).Round(time.Millisecond))
	if err := c.startAPIServer(); err != nil {
		return c, err
	}
	if c.runtime == RuntimeCRIO {
		err = c.waitCRIO(ctx)
	} else if err = c.waitContainerd(ctx); err == nil {
		err = c.importImages(ctx)
	}
	if err != nil {
		return c, err
	}
	c.logf("%s ready, images imported after %s", c.runtime, time.Since(t0).Round(time.Millisecond))
	if err := c.waitAPIServer(ctx); err != nil {
		return c, err
	}
	c.logf("kube-apiserver ready after %s", time.Since(t0).Round(time.Millisecond))
	if err := c.EnsureNamespace(ctx, "default"); err != nil {
		return c, err
	}
	tk := time.Now()
	if err := c.startKubelet(); err != nil {
		return c, err
	}
	wctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := c.WaitNodeReady(wctx); err != nil {
		return c, err
	}
	c.logf("node %s Ready %s after kubelet start, cluster up after %s", c.nodeName,
		time.Since(tk).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	return c, nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf("cluster: "+format, args...)
	}
}

// Client returns a clientset for the admin (system:masters) that dials into the namespace.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// RESTConfig returns a copy of the admin rest.Config; its Dial enters the namespace.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// KubeconfigPath is an admin kubeconfig valid for processes inside the namespace (see Command).
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// AdminToken is the static bearer token of the admin user (group system:masters).
func (c *Cluster) AdminToken() string { return c.pki.adminToken }

// APIServerURL is reachable only from inside the namespace (or via DialContext).
func (c *Cluster) APIServerURL() string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(c.nodeIP.String(), fmt.Sprint(apiserverPort)))
}

// CAFile is the PEM file of the CA that signed the API server's and the kubelet's certs.
func (c *Cluster) CAFile() string { return c.pki.caCert }

// CAPool returns the test CA as a pool, for TLS clients of the API server and kubelet.
func (c *Cluster) CAPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(c.pki.caPEM)
	return p
}

// KubeletClientCert returns the API server's kubelet client certificate (O=system:masters),
// for tests that call the kubelet API directly.
func (c *Cluster) KubeletClientCert() (tls.Certificate, error) {
	return tls.LoadX509KeyPair(c.pki.kubeletClientCert, c.pki.kubeletClientKey)
}

// NodeName is the name the kubelet registered; pods need spec.nodeName (no scheduler runs).
func (c *Cluster) NodeName() string { return c.nodeName }

// NodeIP is the node's InternalIP inside the namespace.
func (c *Cluster) NodeIP() string { return c.nodeIP.String() }

// CgroupRoot is the kubelet's cgroupRoot (cgroupfs driver), a cgroup of this cluster's own.
func (c *Cluster) CgroupRoot() string { return "/" + c.cgroupName }

// KubeletRootDir is the kubelet's --root-dir; pod volumes live under pods/<uid>/volumes.
func (c *Cluster) KubeletRootDir() string { return c.kubeletRoot }

// KubeletURL is the kubelet's HTTPS endpoint (webhook authn/authz), inside the namespace.
func (c *Cluster) KubeletURL() string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(c.nodeIP.String(), fmt.Sprint(kubeletPort)))
}

// PodLogsDir is the kubelet's podLogsDir.
func (c *Cluster) PodLogsDir() string { return c.podLogsDir }

// ContainerdStateDir and ContainerdRoot are containerd's state and root dirs.
func (c *Cluster) ContainerdStateDir() string { return c.ctrdState }
func (c *Cluster) ContainerdRoot() string     { return c.ctrdRoot }

// ContainerdTaskDir is where containerd mounts each container's root filesystem:
// <state>/io.containerd.runtime.v2.task.
func (c *Cluster) ContainerdTaskDir() string {
	return filepath.Join(c.ContainerdStateDir(), "io.containerd.runtime.v2.task")
}

// SnapshotterRoot is the root of containerd's overlayfs snapshotter.
func (c *Cluster) SnapshotterRoot() string {
	return filepath.Join(c.ContainerdRoot(), "io.containerd.snapshotter.v1.overlayfs")
}

// CRIContainersDir is containerd's CRI plugin's container directory, where it keeps the directories of
// image VOLUMEs no Kubernetes mount covers.
func (c *Cluster) CRIContainersDir() string {
	return filepath.Join(c.ContainerdRoot(), "io.containerd.grpc.v1.cri", "containers")
}

// ExporterPathArgs are the exporter's flags naming this node's directories and its kubelet's cgroup
// root and driver (the change signal, on by default, reads the host's /sys/fs/cgroup), for an
// exporter that runs on the node itself (in the cluster's network namespace, the host's mount
// namespace).
func (c *Cluster) ExporterPathArgs() []string {
	if c.runtime == RuntimeCRIO {
		return c.crioExporterPathArgs()
	}
	return []string{"--kubelet.root-dir=" + c.kubeletRoot, "--kubelet.pod-logs-dir=" + c.PodLogsDir(),
		"--containerd.task-dir=" + c.ContainerdTaskDir(), "--containerd.snapshotter-root=" + c.SnapshotterRoot(),
		"--containerd.cri-containers-dir=" + c.CRIContainersDir(),
		"--cgroup.root=" + c.CgroupRoot(), "--cgroup.driver=cgroupfs"}
}

// NetnsPath is the bind-mounted network namespace, for nsenter --net=.
func (c *Cluster) NetnsPath() string { return c.netnsPath }

// WorkDir holds all state and logs (logs/<component>.log).
func (c *Cluster) WorkDir() string { return c.workDir }

// ContainerdSocket is the CRI/containerd socket, e.g. for ctr --address.
func (c *Cluster) ContainerdSocket() string { return c.containerdSock }

// LogPath returns the log file of a component started by Start or StartProcess.
func (c *Cluster) LogPath(name string) string {
	return filepath.Join(c.workDir, "logs", name+".log")
}

// LogTail returns the last n lines of a component's log, for error messages.
func (c *Cluster) LogTail(name string, n int) string { return tailFile(c.LogPath(name), n) }

// Logf reports progress through Options.Logf, for the packages that run parts beside the
// cluster (test/monitoring).
func (c *Cluster) Logf(format string, args ...any) { c.logf(format, args...) }

func (c *Cluster) writeKubeconfigs() error {
	if err := writeKubeconfig(c.kubeconfig, c.APIServerURL(), c.pki.caCert, "admin",
		&clientcmdapi.AuthInfo{Token: c.pki.adminToken}); err != nil {
		return err
	}
	return writeKubeconfig(filepath.Join(c.workDir, "kubelet.kubeconfig"), c.APIServerURL(), c.pki.caCert, "node",
		&clientcmdapi.AuthInfo{ClientCertificate: c.pki.nodeClientCert, ClientKey: c.pki.nodeClientKey})
}

// writeKubeconfig writes a kubeconfig (mode 0600) whose one context reaches server, trusting
// the CA file ca, as user.
func writeKubeconfig(path, server, ca, userName string, user *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["edg"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos[userName] = user
	cfg.Contexts["edg"] = &clientcmdapi.Context{Cluster: "edg", AuthInfo: userName}
	cfg.CurrentContext = "edg"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

func (c *Cluster) startEtcd() error {
	cmd := c.Command(context.Background(), "etcd",
		"--name=default",
		"--data-dir="+filepath.Join(c.workDir, "etcd"),
		"--listen-client-urls="+etcdClientURL,
		"--advertise-client-urls="+etcdClientURL,
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380",
		"--logger=zap",
		"--log-outputs=stderr",
	)
	p, err := c.startProc("etcd", cmd)
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	return err
}

func (c *Cluster) waitEtcd(ctx context.Context) error {
	hc := c.HTTPClient(nil)
	hc.Timeout = 2 * time.Second
	return c.poll(ctx, "etcd healthy", c.etcd, func() (bool, error) {
		resp, err := hc.Get(etcdClientURL + "/health")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "true"), nil
	})
}

// auditPolicy records, at level Metadata (which carries the admission annotations, such as a
// ValidatingAdmissionPolicy's Audit action), the writes of pods and of the workloads with pod
// templates, and nothing else: the tests read only those, and the log stays small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch]
    resources:
      - group: ""
        resources: [pods, replicationcontrollers]
      - group: apps
        resources: [deployments, replicasets, statefulsets, daemonsets]
      - group: batch
        resources: [jobs, cronjobs]
  - level: None
`

// AuditLogPath is the API server's audit log (auditPolicy), one JSON event per line.
func (c *Cluster) AuditLogPath() string { return c.LogPath("kube-apiserver-audit") }

func (c *Cluster) startAPIServer() error {
	policy := filepath.Join(c.workDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.AuditLogPath()), 0o755); err != nil {
		return err
	}
	args := []string{
		"--etcd-servers=" + etcdClientURL,
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", apiserverPort),
		"--advertise-address=" + c.nodeIP.String(),
		"--cert-dir=" + filepath.Join(c.workDir, "apiserver"),
		"--tls-cert-file=" + c.pki.apiserverCert,
		"--tls-private-key-file=" + c.pki.apiserverKey,
		"--client-ca-file=" + c.pki.caCert,
		"--token-auth-file=" + c.pki.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-cluster-ip-range=" + serviceClusterCIDR,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.pki.saPub,
		"--service-account-signing-key-file=" + c.pki.saKey,
		"--kubelet-client-certificate=" + c.pki.kubeletClientCert,
		"--kubelet-client-key=" + c.pki.kubeletClientKey,
		"--kubelet-certificate-authority=" + c.pki.caCert,
		// The default tries the hostname first, which needs DNS the namespace cannot reach.
		"--kubelet-preferred-address-types=InternalIP",
		// Saves CPU on 2-core machines; tests do not exercise fairness.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.AuditLogPath(),
		"--audit-log-maxsize=100", // MB; one old file is kept
		"--audit-log-maxbackup=1",
	}
	args = append(args, c.opts.ExtraAPIServerArgs...)
	return c.startBinary("kube-apiserver", &c.apiserver, args)
}

// startBinary starts the Kubernetes binary name from BinDir with args and keeps its process
// in slot, which c.mu guards.
func (c *Cluster) startBinary(name string, slot **proc, args []string) error {
	p, err := c.startProc(name, c.Command(context.Background(), filepath.Join(c.binDir, name), args...))
	c.mu.Lock()
	*slot = p
	c.mu.Unlock()
	return err
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	hc := c.HTTPClient(&tls.Config{RootCAs: c.CAPool()})
	hc.Timeout = 5 * time.Second
	var last string
	err := c.poll(ctx, "kube-apiserver /readyz", c.apiserver, func() (bool, error) {
		req, _ := http.NewRequest(http.MethodGet, c.APIServerURL()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.pki.adminToken)
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last answer: %s)", err, last)
	}
	return nil
}

func (c *Cluster) startKubelet() error {
	if err := os.MkdirAll(c.kubeletRoot, 0o750); err != nil {
		return err
	}
	resolv := filepath.Join(c.workDir, "resolv.conf")
	// Pods must not reach any resolver outside the namespace.
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/" + c.cgroupName,
		"containerRuntimeEndpoint": "unix://" + c.RuntimeSocket(),
		"address":                  "0.0.0.0",
		"port":                     kubeletPort,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              10248,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true, "cacheTTL": "10s"},
			"x509":      map[string]any{"clientCAFile": c.pki.caCert},
		},
		"authorization": map[string]any{
			"mode":    "Webhook",
			"webhook": map[string]any{"cacheAuthorizedTTL": "10s", "cacheUnauthorizedTTL": "5s"},
		},
		"tlsCertFile":                   c.pki.kubeletServingCert,
		"tlsPrivateKeyFile":             c.pki.kubeletServingKey,
		"localStorageCapacityIsolation": c.opts.LocalStorageCapacityIsolation,
		// "0%" disables a signal: the host's own disk and memory use must never make the
		// test node evict pods; only the emptyDir sizeLimit check (not a threshold) remains.
		"evictionHard": map[string]string{
			"memory.available":   "0%",
			"nodefs.available":   "0%",
			"nodefs.inodesFree":  "0%",
			"imagefs.available":  "0%",
			"imagefs.inodesFree": "0%",
		},
		// 100 disables image GC: the locally imported images cannot be pulled again.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"failSwapOn":                  false,
		"resolvConf":                  resolv,
		"podLogsDir":                  c.PodLogsDir(),
		"serializeImagePulls":         false,
		"nodeStatusUpdateFrequency":   "5s",
		"syncFrequency":               "10s",
		"maxPods":                     50,
	}
	if c.opts.VolumeStatsAggPeriod > 0 {
		cfg["volumeStatsAggPeriod"] = c.opts.VolumeStatsAggPeriod.String()
	}
	for k, v := range c.opts.KubeletConfig {
		cfg[k] = v
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(c.workDir, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + filepath.Join(c.workDir, "kubelet.kubeconfig"),
		"--root-dir=" + c.kubeletRoot,
		"--cert-dir=" + filepath.Join(c.workDir, "kubelet-pki"),
		"--hostname-override=" + c.nodeName,
		"--node-ip=" + c.nodeIP.String(),
		"--v=2",
	}
	args = append(args, c.opts.ExtraKubeletArgs...)
	return c.startBinary("kubelet", &c.kubelet, args)
}

// poll calls f every 250ms until it returns true, ctx ends, ReadyTimeout passes or the
// watched component exits; failures carry the tail of that component's log.
func (c *Cluster) poll(ctx context.Context, what string, watch *proc, f func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, c.opts.ReadyTimeout, true, func(context.Context) (bool, error) {
		ok, err := f()
		if err != nil || ok {
			return ok, err
		}
		if watch != nil && watch.exited() {
			return false, watch.diedError()
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case wait.Interrupted(err) && watch != nil:
		return fmt.Errorf("waiting for %s: %w; last lines of %s:\n%s", what, err, watch.logPath, tailFile(watch.logPath, 30))
	default:
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
}

// saveLogs copies the component logs out of the work dir, which Stop removes.
func (c *Cluster) saveLogs() string {
	if !c.ownWorkDir {
		return filepath.Join(c.workDir, "logs")
	}
	dst := filepath.Join(os.TempDir(), c.netnsName+"-logs")
	src := filepath.Join(c.workDir, "logs")
	entries, err := os.ReadDir(src)
	if err != nil {
		return src + " (none written)"
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return src
	}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(src, e.Name())); err == nil {
			_ = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
	}
	for _, f := range []string{"kubelet-config.yaml", "containerd/config.toml", "crio/crio.conf"} {
		if b, err := os.ReadFile(filepath.Join(c.workDir, f)); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	return dst
}

// Stop tears everything down in dependency order: extra processes, kubelet (so it cannot
// restart containers), containers, containerd, apiserver, etcd; then stray processes,
// mounts, cgroups, the namespace and the work dir. Idempotent.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	t0 := time.Now()
	var errs []error
	step := func(what string, f func()) {
		ts := time.Now()
		f()
		if d := time.Since(ts); d > time.Second {
			c.logf("stop: %s took %s", what, d.Round(time.Millisecond))
		}
	}
	c.mu.Lock()
	extra := append([]*proc(nil), c.extra...)
	c.mu.Unlock()
	step("extra processes", func() {
		for i := len(extra) - 1; i >= 0; i-- {
			extra[i].stop(5 * time.Second)
		}
	})
	step("kubelet", func() { c.kubelet.stop(2 * time.Second) })
	step("containers", func() {
		if c.containerd != nil && !c.containerd.exited() {
			c.killContainers()
		}
	})
	step("containerd", func() { c.containerd.stop(5 * time.Second) })
	// CRI-O leaves its containers running when it stops; killStragglers ends them and their
	// conmons (in the cluster's cgroup and network namespace).
	step("crio", func() { c.crio.stop(5 * time.Second) })
	step("kube-apiserver", func() { c.apiserver.stop(2 * time.Second) })
	step("etcd", func() { c.etcd.stop(5 * time.Second) })
	if n := c.killStragglers(); n > 0 {
		c.logf("killed %d stray processes", n)
	}
	if err := unmountUnder(c.workDir); err != nil {
		errs = append(errs, err)
	}
	if err := c.removeNewCNINetns(); err != nil {
		errs = append(errs, err)
	}
	if err := c.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if c.netnsName != "" {
		if _, err := os.Stat(c.netnsPath); err == nil {
			if out, err := runCmd(context.Background(), "ip", "netns", "del", c.netnsName); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", c.netnsName, err, out))
			}
		}
	}
	c.removeHostLeftovers()
	if err := removeLayoutDirs(c.layoutCreated); err != nil {
		errs = append(errs, err)
	}
	if c.layoutLock != nil {
		_ = c.layoutLock.Close() // releases the lock
	}
	if c.opts.KeepLogs {
		c.logf("logs kept in %s", c.saveLogs())
	}
	if c.ownWorkDir && c.workDir != "" {
		if err := os.RemoveAll(c.workDir); err != nil {
			errs = append(errs, fmt.Errorf("remove work dir: %w", err))
		}
	}
	if len(errs) == 0 {
		c.removeState()
	}
	c.logf("stopped in %s", time.Since(t0).Round(time.Millisecond))
	return errors.Join(errs...)
}

// killContainers kills every task with SIGKILL: busybox sleep as PID 1 ignores SIGTERM, and
// once the kubelet is gone nobody else would stop the pods.
func (c *Cluster) killContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctr := func(args ...string) ([]byte, error) {
		return runCmd(ctx, "ctr", append([]string{"-n", "k8s.io", "--address", c.containerdSock}, args...)...)
	}
	out, err := ctr("tasks", "ls", "-q")
	if err != nil {
		c.logf("ctr tasks ls: %v: %s", err, out)
		return
	}
	ids := strings.Fields(string(out))
	if all, err := ctr("containers", "ls", "-q"); err == nil {
		c.containerIDs = strings.Fields(string(all))
	}
	for _, id := range ids {
		_, _ = ctr("tasks", "kill", "-a", "-s", "SIGKILL", id)
	}
	// containerd's CRI plugin deletes tasks itself on their exit event; delete whatever is
	// left until no task remains. Stop goes on after 15 s regardless: what is left is said.
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		out, err := ctr("tasks", "ls", "-q")
		left = strings.Fields(string(out))
		if err == nil && len(left) == 0 {
			return true, nil
		}
		for _, id := range left {
			_, _ = ctr("tasks", "delete", "-f", id)
		}
		return false, nil
	})
	if err != nil {
		c.logf("ctr tasks delete: %v; tasks left: %v", err, left)
	}
	if len(ids) > 0 {
		c.logf("killed %d containers", len(ids))
	}
}

// Kubectl runs kubectl inside the namespace against this cluster and returns its stdout
// (stderr, which carries warnings, goes into the error only).
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := c.Command(ctx, "kubectl", append([]string{"--kubeconfig=" + c.kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
