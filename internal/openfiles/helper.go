package openfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// A Landlock domain (internal/denywrites) keeps its process from reading the descriptors of
// processes outside it, CAP_SYS_PTRACE or not. So the exporter starts a Helper before it
// restricts itself: a child of its own binary, outside the domain, that only answers counts
// over a pipe; the exporter itself, restricted, cannot read another process's descriptors or
// memory even holding the capability.

// HelperArg is the argument that makes the exporter's binary serve as a Helper (ServeHelper).
const HelperArg = "--open-files-helper"

type request struct {
	Proc   string `json:"proc"`
	PIDs   []int  `json:"pids"`
	Target Target `json:"target"`
}

type answer struct {
	Usage  Usage  `json:"usage"`
	Err    string `json:"err,omitempty"`
	Denied bool   `json:"denied,omitempty"`
}

// ServeHelper answers requests from r on w until r ends: the child's side of a Helper.
func ServeHelper(r io.Reader, w io.Writer) error {
	dec, enc := json.NewDecoder(r), json.NewEncoder(w)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		u, err := Count(req.Proc, req.PIDs, req.Target)
		a := answer{Usage: u}
		if err != nil {
			a.Err, a.Denied = err.Error(), errors.Is(err, ErrDenied)
		}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
}

// Helper counts through a child process (ServeHelper), one request at a time.
type Helper struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	enc *json.Encoder
	dec *json.Decoder
	// broken is why the helper answers no more: it ended, or a request outlived its context.
	broken error
}

// StartHelper starts this process's own binary with HelperArg as a Helper: its main must call
// ServeHelper then. It ends when its input does (this process ended), or is killed with the
// thread that started it.
func StartHelper() (*Helper, error) {
	cmd := exec.Command("/proc/self/exe", HelperArg)
	cmd.SysProcAttr = helperAttr()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the open-files helper: %w", err)
	}
	return &Helper{cmd: cmd, enc: json.NewEncoder(in), dec: json.NewDecoder(out)}, nil
}

// Count is Count run in the helper. A request that outlives ctx (a descriptor on a hung
// filesystem) kills the helper: every later one then fails.
func (h *Helper) Count(ctx context.Context, proc string, pids []int, t Target) (Usage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return Usage{}, h.broken
	}
	if err := ctx.Err(); err != nil {
		return Usage{}, err // sent nothing: the helper stays
	}
	done := make(chan answer, 1)
	failed := make(chan error, 1)
	go func() {
		var a answer
		if err := h.enc.Encode(request{Proc: proc, PIDs: pids, Target: t}); err != nil {
			failed <- err
			return
		}
		if err := h.dec.Decode(&a); err != nil {
			failed <- err
			return
		}
		done <- a
	}()
	select {
	case a := <-done:
		switch {
		case a.Denied:
			return a.Usage, fmt.Errorf("%w (open-files helper: %s)", ErrDenied, a.Err)
		case a.Err != "":
			return a.Usage, fmt.Errorf("open-files helper: %s", a.Err)
		}
		return a.Usage, nil
	case err := <-failed:
		h.broken = fmt.Errorf("the open-files helper ended: %w", err)
	case <-ctx.Done():
		h.broken = fmt.Errorf("the open-files helper was stopped after a request outlived its deadline: %w", ctx.Err())
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	return Usage{}, h.broken
}

// Close stops the helper.
func (h *Helper) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken == nil {
		h.broken = errors.New("the open-files helper was closed")
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	}
	return nil
}
