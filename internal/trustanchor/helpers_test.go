package trustanchor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// sentinel appears in every path, password and (where the format allows)
// material the tests use, so an error that leaked any of them would contain
// it.
const sentinel = "S3NTINEL-7c1e"

// bundlePassword protects the bundles the tests write.
const bundlePassword = "pw-" + sentinel

// recordingResolver is a real *secret.Resolver that remembers every buffer
// it handed out, so tests can check Load wiped them.
type recordingResolver struct {
	inner secret.Resolver
	mu    sync.Mutex
	out   [][]byte
}

func (r *recordingResolver) Resolve(ctx context.Context, ref secret.Reference) ([]byte, error) {
	b, err := r.inner.Resolve(ctx, ref)
	if err == nil {
		r.mu.Lock()
		r.out = append(r.out, b)
		r.mu.Unlock()
	}
	return b, err
}

func (r *recordingResolver) handedOut() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.out...)
}

// fixture is a directory of secret files and a resolver reading them.
type fixture struct {
	t   *testing.T
	dir string
	r   *recordingResolver
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), sentinel)
	require.NoError(t, os.Mkdir(dir, 0o700))
	return &fixture{t: t, dir: dir, r: &recordingResolver{}}
}

// file writes data to a new file and returns its reference.
func (f *fixture) file(name string, data []byte) secret.Reference {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	require.NoError(f.t, os.WriteFile(path, data, 0o600))
	return secret.Reference{Scheme: secret.SchemeFile, Target: path}
}

// missing returns a reference to a file that does not exist.
func (f *fixture) missing(name string) secret.Reference {
	return secret.Reference{Scheme: secret.SchemeFile, Target: filepath.Join(f.dir, name)}
}

// password writes pw to a new file and returns a pointer to its reference.
func (f *fixture) password(pw string) *secret.Reference {
	f.t.Helper()
	ref := f.file("password-"+strings.ReplaceAll(f.t.Name(), "/", "_"), []byte(pw+"\n"))
	return &ref
}

func (f *fixture) load(src Source, pw *secret.Reference, mode InterpretationMode) (*Anchor, error) {
	return Load(context.Background(), f.r, src, pw, mode)
}

// requireLoadFailure asserts err is a *LoadError with identity want whose
// text carries the identity in brackets and none of the secrets.
func requireLoadFailure(t *testing.T, err error, want Failure, secrets ...string) *LoadError {
	t.Helper()
	require.Error(t, err)
	var le *LoadError
	require.ErrorAs(t, err, &le, "%T: %v", err, err)
	require.Equal(t, want, le.Failure, "%v", err)
	require.True(t, errors.Is(err, &LoadError{Failure: want}))
	require.True(t, strings.HasSuffix(err.Error(), "["+string(want)+"]"), err.Error())
	require.NotContains(t, err.Error(), sentinel)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}
	return le
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}
