package serverproc

import "os"

// DirParent returns the directory MakeDir creates instance directories
// in: the temporary directory, or /tmp when its path is long, since a
// server's UNIX sockets live below its instance directory and sun_path
// holds 107 bytes.
func DirParent() string {
	if parent := os.TempDir(); len(parent) <= 40 {
		return parent
	}
	return "/tmp"
}

// MakeDir creates a new instance directory in DirParent, named prefix and
// a random suffix, with mode 0755, so that the unprivileged users a
// server's processes run as reach their files.
func MakeDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp(DirParent(), prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
