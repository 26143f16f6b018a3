package secret

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultDockerSecretsDirectory is where Docker and Compose mount secrets.
const DefaultDockerSecretsDirectory = "/run/secrets"

// CredentialsDirectoryVariable is the environment variable systemd sets to
// the directory holding a unit's credentials.
const CredentialsDirectoryVariable = "CREDENTIALS_DIRECTORY"

// MaxMaterialBytes bounds how much material one reference may produce. It is
// far above any password, certificate bundle or key an operator provisions,
// and keeps a reference pointed at the wrong file from reading it whole.
const MaxMaterialBytes = 4 << 20

// Resolver reads the material behind a Reference. The zero value reads the
// process environment, $CREDENTIALS_DIRECTORY and /run/secrets. It caches
// nothing: every Resolve reads the material again, so rotation is observed by
// the next operation. It is safe for concurrent use.
type Resolver struct {
	// LookupEnv looks up env: targets and $CREDENTIALS_DIRECTORY. Nil means
	// os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// CredentialsDirectory overrides $CREDENTIALS_DIRECTORY for
	// systemd-credential: references when non-empty.
	CredentialsDirectory string
	// DockerSecretsDirectory overrides DefaultDockerSecretsDirectory for
	// docker-secret: references when non-empty.
	DockerSecretsDirectory string
}

// Resolve returns the material ref names, read now, with one trailing
// newline ("\n" or "\r\n") removed so files written by echo work. Empty
// material is a failure. The caller owns the returned slice and should
// overwrite it when the operation that needed it ends.
//
// Every error is an *Error: MaterialMissing for the zero Reference,
// ReferenceMalformed for a reference that does not validate, and
// SecretNotResolvable when no material could be read.
func (r *Resolver) Resolve(ctx context.Context, ref Reference) ([]byte, error) {
	if ref.IsZero() {
		return nil, &Error{Failure: MaterialMissing, Reason: "no secret reference is configured"}
	}
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, notResolvable(ref.Scheme, "resolution was cancelled", err)
	}

	var (
		material []byte
		err      *Error
	)
	switch ref.Scheme {
	case SchemeEnv:
		material, err = r.fromEnv(ref.Target)
	case SchemeFile:
		material, err = readMaterial(ref.Scheme, ref.Target)
	case SchemeSystemdCredential:
		dir := r.CredentialsDirectory
		if dir == "" {
			dir, _ = r.lookupEnv(CredentialsDirectoryVariable)
		}
		if dir == "" {
			return nil, notResolvable(ref.Scheme, "$"+CredentialsDirectoryVariable+" is not set; the service is not running under systemd with credentials", nil)
		}
		material, err = readMaterial(ref.Scheme, filepath.Join(dir, ref.Target))
	case SchemeDockerSecret:
		dir := r.DockerSecretsDirectory
		if dir == "" {
			dir = DefaultDockerSecretsDirectory
		}
		material, err = readMaterial(ref.Scheme, filepath.Join(dir, ref.Target))
	}
	if err != nil {
		return nil, err
	}

	material = trimOneNewline(material)
	if len(material) == 0 {
		clear(material)
		return nil, notResolvable(ref.Scheme, "the referenced material is empty", nil)
	}
	return material, nil
}

func (r *Resolver) lookupEnv(name string) (string, bool) {
	if r.LookupEnv != nil {
		return r.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

func (r *Resolver) fromEnv(name string) ([]byte, *Error) {
	v, ok := r.lookupEnv(name)
	if !ok {
		return nil, notResolvable(SchemeEnv, "the referenced environment variable is not set", nil)
	}
	return []byte(v), nil
}

func readMaterial(scheme, path string) ([]byte, *Error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, notResolvable(scheme, "the referenced file could not be opened ("+fileProblem(err)+")", sanitize(err))
	}
	defer f.Close()
	material, err := io.ReadAll(io.LimitReader(f, MaxMaterialBytes+1))
	if err != nil {
		clear(material)
		return nil, notResolvable(scheme, "the referenced file could not be read ("+fileProblem(err)+")", sanitize(err))
	}
	if len(material) > MaxMaterialBytes {
		clear(material)
		return nil, notResolvable(scheme, "the referenced file is larger than 4 MiB", nil)
	}
	return material, nil
}

// fileProblem describes a file error by its kind, never by its path.
func fileProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Op + ": " + pe.Err.Error()
		}
		return "I/O error"
	}
}

// sanitize keeps a path-free sentinel of err for errors.Is.
func sanitize(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fs.ErrNotExist
	case errors.Is(err, fs.ErrPermission):
		return fs.ErrPermission
	default:
		return nil
	}
}

func trimOneNewline(b []byte) []byte {
	if bytes.HasSuffix(b, []byte("\r\n")) {
		return b[:len(b)-2]
	}
	if bytes.HasSuffix(b, []byte("\n")) {
		return b[:len(b)-1]
	}
	return b
}
