// Package secret parses secret references and resolves them into material.
//
// A secret-bearing setting never holds the credential itself. It holds a
// reference of the form <scheme>:<target>, and the material behind it is read
// fresh each time an operation needs it, so a rotated credential is observed
// without a restart. Four schemes exist:
//
//	file:<path>                 the contents of a file
//	env:<NAME>                  the value of an environment variable
//	systemd-credential:<name>   a file under $CREDENTIALS_DIRECTORY
//	docker-secret:<name>        a file under /run/secrets
//
// Neither a reference's target nor any material ever appears in an error
// produced by this package: an error names the scheme and a stable failure
// identity only.
package secret

import (
	"fmt"
	"log/slog"
	"strings"
)

// The four reference schemes.
const (
	// SchemeFile names a file by path.
	SchemeFile = "file"
	// SchemeEnv names an environment variable of the process.
	SchemeEnv = "env"
	// SchemeSystemdCredential names a credential systemd placed under
	// $CREDENTIALS_DIRECTORY (LoadCredential=, SetCredentialEncrypted=).
	SchemeSystemdCredential = "systemd-credential"
	// SchemeDockerSecret names a Docker or Compose secret mounted under
	// /run/secrets.
	SchemeDockerSecret = "docker-secret"
)

// Schemes lists the supported schemes in documentation order.
var Schemes = []string{SchemeFile, SchemeEnv, SchemeSystemdCredential, SchemeDockerSecret}

// ReservedEnvPrefix is the prefix an env: target must not carry: variables
// with it are MailFathom's own configuration, which never holds material.
const ReservedEnvPrefix = "MAILFATHOM_"

// Reference is a parsed <scheme>:<target> secret reference. The zero value
// means no reference is configured.
type Reference struct {
	// Scheme is one of SchemeFile, SchemeEnv, SchemeSystemdCredential and
	// SchemeDockerSecret.
	Scheme string
	// Target is the path (file:) or name (the other schemes) the scheme
	// resolves. It is never the material itself.
	Target string
}

// ParseReference parses s as a <scheme>:<target> reference. The scheme is
// matched exactly (lower case). An error never contains any part of s, so it
// is safe to report even when an operator pasted a credential where a
// reference belongs.
func ParseReference(s string) (Reference, error) {
	scheme, target, ok := strings.Cut(s, ":")
	if !ok {
		return Reference{}, malformed("", "a secret reference has the form <scheme>:<target>, with scheme one of "+schemeList())
	}
	if !isScheme(scheme) {
		return Reference{}, malformed("", "the scheme is not supported; use one of "+schemeList())
	}
	ref := Reference{Scheme: scheme, Target: target}
	if err := ref.Validate(); err != nil {
		return Reference{}, err
	}
	return ref, nil
}

// Validate reports whether r is a well-formed reference: a known scheme and
// a non-empty target acceptable to that scheme.
func (r Reference) Validate() error {
	if !isScheme(r.Scheme) {
		return malformed("", "the scheme is not supported; use one of "+schemeList())
	}
	if r.Target == "" {
		return malformed(r.Scheme, "the target after the scheme is empty")
	}
	if strings.ContainsRune(r.Target, 0) {
		return malformed(r.Scheme, "the target contains a NUL character")
	}
	switch r.Scheme {
	case SchemeEnv:
		if strings.ContainsAny(r.Target, "= \t\r\n") {
			return malformed(r.Scheme, "the target must be an environment variable name")
		}
		if strings.HasPrefix(strings.ToUpper(r.Target), ReservedEnvPrefix) {
			return malformed(r.Scheme, "the target must not name a "+ReservedEnvPrefix+" variable: those are configuration, never material")
		}
	case SchemeSystemdCredential, SchemeDockerSecret:
		if strings.ContainsAny(r.Target, `/\`) || r.Target == "." || r.Target == ".." {
			return malformed(r.Scheme, "the target must be a plain name, not a path")
		}
	}
	return nil
}

// IsZero reports whether r is the zero Reference, meaning none is configured.
func (r Reference) IsZero() bool { return r == Reference{} }

// String returns a masked form, the scheme followed by ":***", which is safe
// for logs and errors. The target is withheld: diagnostics name the
// configuration variable that holds a reference, not what it points at.
func (r Reference) String() string {
	if r.IsZero() {
		return "(none)"
	}
	return r.Scheme + ":***"
}

// GoString returns the masked form, so %#v withholds the target too.
func (r Reference) GoString() string { return "secret.Reference(" + r.String() + ")" }

// LogValue returns the masked form for log/slog.
func (r Reference) LogValue() slog.Value { return slog.StringValue(r.String()) }

func isScheme(s string) bool {
	for _, known := range Schemes {
		if s == known {
			return true
		}
	}
	return false
}

func schemeList() string {
	parts := make([]string, len(Schemes))
	for i, s := range Schemes {
		parts[i] = s + ":"
	}
	return strings.Join(parts, ", ")
}

var _ fmt.GoStringer = Reference{}
