package security

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

const (
	nodeName  = "node-1"
	podNS     = "default"
	podName   = "victim"
	podUID    = "0b0e3f4a-5c6d-4e7f-8091-a2b3c4d5e6f7"
	volume    = "empty"
	usedBytes = 10 << 20 // over the 1Mi sizeLimit
)

// victimPod runs on nodeName with a 1Mi emptyDir that its container mounts.
func victimPod() *corev1.Pod {
	limit := resource.MustParse("1Mi")
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: podName, UID: podUID, ResourceVersion: "7"},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// fakeAPIServer answers what the exporter and the remediator ask of the API server for the
// victim pod: the pod list and watch of the node, the pod, its eviction and Events. Every
// request must carry token; the others get 401.
type fakeAPIServer struct {
	*httptest.Server
	token string

	mu           sync.Mutex
	evictions    int
	unauthorized int
	authorized   int
}

func newFakeAPIServer(t *testing.T, token string) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{token: token}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ok := r.Header.Get("Authorization") == "Bearer "+f.token
	if ok {
		f.authorized++
	} else {
		f.unauthorized++
	}
	f.mu.Unlock()
	if !ok {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	podPath := "/api/v1/namespaces/" + podNS + "/pods/" + podName
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// A streaming list: the pod, then the bookmark that ends the initial events.
			enc := json.NewEncoder(w)
			_ = enc.Encode(metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Object: victimPod()}})
			_ = enc.Encode(metav1.WatchEvent{Type: "BOOKMARK", Object: runtime.RawExtension{Object: &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7",
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
			}}})
		}
		// No changes: hold the watch open until the client goes.
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods":
		writeJSON(w, http.StatusOK, &corev1.PodList{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
			ListMeta: metav1.ListMeta{ResourceVersion: "7"},
			Items:    []corev1.Pod{*victimPod()},
		})
	case r.Method == http.MethodGet && r.URL.Path == podPath:
		writeJSON(w, http.StatusOK, victimPod())
	case r.Method == http.MethodPost && r.URL.Path == podPath+"/eviction":
		f.mu.Lock()
		f.evictions++
		f.mu.Unlock()
		writeStatus(w, http.StatusCreated, "")
	case strings.HasSuffix(r.URL.Path, "/events") || strings.Contains(r.URL.Path, "/events/"):
		// Refused, so that the remediator also logs a failing API call.
		writeStatus(w, http.StatusForbidden, "events are forbidden in this test")
	default:
		writeStatus(w, http.StatusNotFound, r.Method+" "+r.URL.Path+" is not served by the fake API server")
	}
}

func (f *fakeAPIServer) counts() (evictions, authorized, unauthorized int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evictions, f.authorized, f.unauthorized
}

// newFakeKubelet serves the Summary API with the victim's volume at usedBytes, stamped now,
// to callers with token; the others get 401.
func newFakeKubelet(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/stats/summary" {
			http.NotFound(w, r)
			return
		}
		used, capacity, inodes := uint64(usedBytes), uint64(100<<30), uint64(3)
		writeJSON(w, http.StatusOK, statsapi.Summary{
			Node: statsapi.NodeStats{NodeName: nodeName},
			Pods: []statsapi.PodStats{{
				PodRef: statsapi.PodReference{Namespace: podNS, Name: podName, UID: podUID},
				VolumeStats: []statsapi.VolumeStats{{Name: volume, FsStats: statsapi.FsStats{
					Time: metav1.Now(), UsedBytes: &used, CapacityBytes: &capacity, AvailableBytes: &capacity, InodesUsed: &inodes,
				}}},
			}},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, msg string) {
	status := metav1.StatusSuccess
	if code >= 300 {
		status = metav1.StatusFailure
	}
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: status, Message: msg, Code: int32(code)})
}
