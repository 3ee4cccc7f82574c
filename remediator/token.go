package remediator

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// tokenFile is a bearer token kept in a file that is rotated in place, as a mounted Secret
// is (the kubelet swaps a symlink). A cheap stat on each request finds a change; the file is
// then read again. A token that cannot be read whole — the read fails, the file is empty or
// changes during the read — is not taken: the previous token stays in force and the next
// request tries again, so a rotation never leaves the webhook without a token.
type tokenFile struct {
	path   string
	logger *slog.Logger

	mu    sync.Mutex
	token []byte
	stamp os.FileInfo // of the file the token was read from
	bad   os.FileInfo // of the last file version that could not be used, logged once
}

// loadTokenFile reads the token at path; it must be readable and not empty.
func loadTokenFile(path string, logger *slog.Logger) (*tokenFile, error) {
	f := &tokenFile{path: path, logger: logger}
	token, stamp, err := readToken(path)
	if err != nil {
		return nil, err
	}
	f.token, f.stamp = token, stamp
	return f, nil
}

// current returns the token in force, reading the file again when it changed.
func (f *tokenFile) current() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err == nil && sameVersion(fi, f.stamp) {
		return f.token
	}
	if err == nil && f.bad != nil && sameVersion(fi, f.bad) {
		return f.token // already known to be unusable, already logged
	}
	token, stamp, err := readToken(f.path)
	if err != nil {
		if fi != nil {
			f.bad = fi
		}
		f.logger.Error("bearer token file changed but cannot be used; keeping the previous token", "file", f.path, "err", err)
		return f.token
	}
	f.token, f.stamp, f.bad = token, stamp, nil
	f.logger.Info("bearer token file reloaded", "file", f.path)
	return f.token
}

// readToken reads the token and the file's version; a file that changed during the read
// is refused, so a half-written token is never taken.
func readToken(path string) ([]byte, os.FileInfo, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("bearer token file: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("bearer token file: %w", err)
	}
	after, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("bearer token file: %w", err)
	}
	if !sameVersion(before, after) {
		return nil, nil, errors.New("bearer token file changed while it was read")
	}
	token := bytes.TrimSpace(b)
	if len(token) == 0 {
		return nil, nil, fmt.Errorf("bearer token file %q is empty", path)
	}
	return token, after, nil
}

// sameVersion reports whether a and b describe the same version of a file: the same file
// (a Secret rotation makes the path resolve to a new one), size and modification time.
func sameVersion(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
