package remediator

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The default recorder posts events.k8s.io/v1 Events: a reporting controller, an action and
// an eventTime to the microsecond, on the pod by UID.
func TestDefaultRecorderPostsEventsV1(t *testing.T) {
	e := newEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	srv, err := New(testConfig(), e.client, e.measurer, WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e.srv, e.handler = srv, srv.Handler()

	if code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1))); code != http.StatusOK {
		t.Fatalf("code %d: %+v", code, resp)
	}

	// The recorder posts in the background.
	var got []string
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, ev := range list.Items {
			if ev.Reason != EventEvicted {
				continue
			}
			if ev.Action != ActionEvict || ev.ReportingController != Component || string(ev.Regarding.UID) != uid1 ||
				ev.EventTime.IsZero() || !strings.Contains(ev.Note, "limit 1Mi") {
				t.Errorf("Event %+v: want action %s, reporting controller %s, regarding uid %s, an eventTime, the sizes in its note",
					ev, ActionEvict, Component, uid1)
			}
			got = append(got, ev.Name)
		}
		return len(got) > 0, nil
	})
	if err != nil {
		t.Fatalf("no events.k8s.io/v1 %s Event on the pod: %v", EventEvicted, err)
	}
	if core, err := e.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{}); err != nil || len(core.Items) != 0 {
		t.Errorf("core/v1 Events %v (%v), want none: one Event API", core, err)
	}
}
