package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// uiPasswordFile is where the embedded default keeps the River UI password
// it generated, beside the cluster's data directory.
const uiPasswordFile = "ui-password"

// embeddedUIPassword returns the River UI password of an embedded-default
// deployment: generated on first start, kept in a 0600 file beside the data
// directory so it survives restarts, and read from that file on each
// request. The console note shows the password the one time it is
// generated and only the file's path afterwards; the structured log never
// carries it.
func embeddedUIPassword(dataDir string) (func(context.Context) ([]byte, error), string, error) {
	path, err := filepath.Abs(filepath.Join(filepath.Dir(filepath.Clean(dataDir)), uiPasswordFile))
	if err != nil {
		return nil, "", fmt.Errorf("river ui password file: %w", err)
	}
	read := func(context.Context) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("river ui password file: %w", err)
		}
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if _, err := os.Stat(path); err == nil {
		return read, fmt.Sprintf("River UI password: in %s", path), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("river ui password file: %w", err)
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return nil, "", err
	}
	password := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", fmt.Errorf("river ui password file: %w", err)
	}
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return nil, "", fmt.Errorf("river ui password file: %w", err)
	}
	return read, fmt.Sprintf("River UI password (generated once, kept in %s): %s", path, password), nil
}
