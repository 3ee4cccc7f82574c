package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every interval until it returns true, and fails the test when timeout
// passes first. It stays beside wait.PollUntilContextTimeout for what a bare timeout error
// lacks: cond's message of its last try, which says how far from done the wait got.
func Eventually(t TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
	}
}
