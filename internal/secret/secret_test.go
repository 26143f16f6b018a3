package secret

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sentinel = "S3NTINEL-material-7f3a"

func TestParseReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   Reference
		reject bool
	}{
		{in: "file:/run/secrets/pg", want: Reference{Scheme: SchemeFile, Target: "/run/secrets/pg"}},
		{in: "file:relative/path", want: Reference{Scheme: SchemeFile, Target: "relative/path"}},
		{in: "env:IMAP_PASSWORD", want: Reference{Scheme: SchemeEnv, Target: "IMAP_PASSWORD"}},
		{in: "systemd-credential:imap-primary-password", want: Reference{Scheme: SchemeSystemdCredential, Target: "imap-primary-password"}},
		{in: "docker-secret:postgres-password", want: Reference{Scheme: SchemeDockerSecret, Target: "postgres-password"}},
		{in: "file:with:colon", want: Reference{Scheme: SchemeFile, Target: "with:colon"}},
		{in: "", reject: true},
		{in: sentinel, reject: true},
		{in: "vault:" + sentinel, reject: true},
		{in: "FILE:/x", reject: true},
		{in: "file:", reject: true},
		{in: "env:", reject: true},
		{in: "env:MAILFATHOM_SYNC_ENABLED", reject: true},
		{in: "env:mailfathom_anything", reject: true},
		{in: "env:A=B", reject: true},
		{in: "systemd-credential:../etc/shadow", reject: true},
		{in: "systemd-credential:..", reject: true},
		{in: "docker-secret:a/b", reject: true},
		{in: "file:a\x00b", reject: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseReference(tt.in)
			if tt.reject {
				require.Error(t, err)
				var se *Error
				require.ErrorAs(t, err, &se)
				require.Equal(t, ReferenceMalformed, se.Failure)
				require.NotContains(t, err.Error(), sentinel)
				if after, ok := strings.CutPrefix(tt.in, "vault:"); ok {
					require.NotContains(t, err.Error(), "vault")
					require.NotContains(t, err.Error(), after)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReferenceStringMasksTarget(t *testing.T) {
	t.Parallel()
	ref := Reference{Scheme: SchemeFile, Target: "/secret/" + sentinel}
	require.Equal(t, "file:***", ref.String())
	for _, s := range []string{
		fmt.Sprint(ref), fmt.Sprintf("%v %+v %#v %s", ref, ref, ref, ref),
		ref.LogValue().String(),
	} {
		require.NotContains(t, s, sentinel)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "ref", ref)
	require.NotContains(t, b.String(), sentinel)
	require.Equal(t, "(none)", Reference{}.String())
	require.True(t, Reference{}.IsZero())
	require.False(t, ref.IsZero())
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestResolveSchemes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credDir := t.TempDir()
	dockerDir := t.TempDir()
	writeFile(t, dir, "echoed", sentinel+"\n")
	writeFile(t, dir, "crlf", sentinel+"\r\n")
	writeFile(t, dir, "two-newlines", sentinel+"\n\n")
	writeFile(t, dir, "bare", sentinel)
	writeFile(t, credDir, "imap", "cred-"+sentinel+"\n")
	writeFile(t, dockerDir, "pg", "docker-"+sentinel+"\n")
	env := map[string]string{"IMAP_PW": "env-" + sentinel, "CREDENTIALS_DIRECTORY": credDir}
	r := &Resolver{
		LookupEnv:              func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		DockerSecretsDirectory: dockerDir,
	}
	tests := []struct {
		ref  Reference
		want string
	}{
		{Reference{SchemeFile, filepath.Join(dir, "echoed")}, sentinel},
		{Reference{SchemeFile, filepath.Join(dir, "crlf")}, sentinel},
		{Reference{SchemeFile, filepath.Join(dir, "two-newlines")}, sentinel + "\n"},
		{Reference{SchemeFile, filepath.Join(dir, "bare")}, sentinel},
		{Reference{SchemeEnv, "IMAP_PW"}, "env-" + sentinel},
		{Reference{SchemeSystemdCredential, "imap"}, "cred-" + sentinel},
		{Reference{SchemeDockerSecret, "pg"}, "docker-" + sentinel},
	}
	for _, tt := range tests {
		got, err := r.Resolve(context.Background(), tt.ref)
		require.NoError(t, err, tt.ref.Scheme)
		require.Equal(t, tt.want, string(got))
	}
}

func TestResolveReadsFreshEveryCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "pw", "first\n")
	var r Resolver
	ref := Reference{Scheme: SchemeFile, Target: p}
	got, err := r.Resolve(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, "first", string(got))
	writeFile(t, dir, "pw", "rotated\n")
	got, err = r.Resolve(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, "rotated", string(got))
}

func TestResolveFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "empty", "")
	writeFile(t, dir, "newline-only", "\n")
	big := writeFile(t, dir, "big", strings.Repeat(sentinel, MaxMaterialBytes/len(sentinel)+1))
	noEnv := &Resolver{LookupEnv: func(string) (string, bool) { return "", false }}
	emptyEnv := &Resolver{LookupEnv: func(string) (string, bool) { return "", true }}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name    string
		r       *Resolver
		ctx     context.Context
		ref     Reference
		failure Failure
		is      error
	}{
		{"zero reference", noEnv, context.Background(), Reference{}, MaterialMissing, nil},
		{"unknown scheme", noEnv, context.Background(), Reference{Scheme: "vault", Target: sentinel}, ReferenceMalformed, nil},
		{"reserved env", noEnv, context.Background(), Reference{Scheme: SchemeEnv, Target: "MAILFATHOM_" + sentinel}, ReferenceMalformed, nil},
		{"missing file", noEnv, context.Background(), Reference{SchemeFile, filepath.Join(dir, sentinel)}, SecretNotResolvable, fs.ErrNotExist},
		{"directory", noEnv, context.Background(), Reference{SchemeFile, dir}, SecretNotResolvable, nil},
		{"empty file", noEnv, context.Background(), Reference{SchemeFile, filepath.Join(dir, "empty")}, SecretNotResolvable, nil},
		{"newline only", noEnv, context.Background(), Reference{SchemeFile, filepath.Join(dir, "newline-only")}, SecretNotResolvable, nil},
		{"too large", noEnv, context.Background(), Reference{SchemeFile, big}, SecretNotResolvable, nil},
		{"env unset", noEnv, context.Background(), Reference{SchemeEnv, sentinel}, SecretNotResolvable, nil},
		{"env empty", emptyEnv, context.Background(), Reference{SchemeEnv, sentinel}, SecretNotResolvable, nil},
		{"no credentials directory", noEnv, context.Background(), Reference{SchemeSystemdCredential, sentinel}, SecretNotResolvable, nil},
		{"docker secret missing", &Resolver{DockerSecretsDirectory: dir}, context.Background(), Reference{SchemeDockerSecret, sentinel}, SecretNotResolvable, fs.ErrNotExist},
		{"cancelled", noEnv, cancelled, Reference{SchemeFile, big}, SecretNotResolvable, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.r.Resolve(tt.ctx, tt.ref)
			require.Nil(t, got)
			var se *Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.failure, se.Failure)
			require.True(t, errors.Is(err, &Error{Failure: tt.failure}))
			require.Contains(t, err.Error(), "["+string(tt.failure)+"]")
			require.NotContains(t, err.Error(), sentinel)
			require.NotContains(t, err.Error(), dir)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}
