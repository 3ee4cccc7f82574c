package framework

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// recordingTB is a TB whose Fatalf records the failure and ends the calling goroutine, as
// testing.T's does, without failing the test.
type recordingTB struct {
	testing.TB
	fatal []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func TestEventually(t *testing.T) {
	for _, tc := range []struct {
		name      string
		doneAt    int // the call at which cond first returns true; 0: never
		wantCalls int // exactly, or at least when wantFatal
		wantFatal string
	}{
		{name: "true at once: one call", doneAt: 1, wantCalls: 1},
		{name: "true at the third call: polls until then", doneAt: 3, wantCalls: 3},
		{name: "never true: fails with what, the timeout and the last message", wantCalls: 2,
			wantFatal: "the thing: not within 200ms; last: call "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			calls := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				Eventually(rec, 200*time.Millisecond, 10*time.Millisecond, "the thing", func() (bool, string) {
					calls++
					return calls == tc.doneAt, fmt.Sprintf("call %d", calls)
				})
			}()
			<-done
			if tc.wantFatal == "" {
				if len(rec.fatal) != 0 || calls != tc.wantCalls {
					t.Errorf("Fatalf %q after %d calls, want none after %d", rec.fatal, calls, tc.wantCalls)
				}
				return
			}
			// The message must quote the last call's message, not an earlier one.
			want := tc.wantFatal + fmt.Sprint(calls)
			if len(rec.fatal) != 1 || rec.fatal[0] != want || calls < tc.wantCalls {
				t.Errorf("Fatalf %q after %d calls, want exactly [%q] after at least %d calls", rec.fatal, calls, want, tc.wantCalls)
			}
		})
	}
}
