package capture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sweep gathers everything the code under test produced — log text, errors
// in every format a caller might print them, metrics — so a test can search
// it for secrets that must never appear. The zero value is ready to use.
type Sweep struct {
	parts []part
}

type part struct{ what, text string }

// Add adds text under the name what (e.g. "log", "job arguments").
func (s *Sweep) Add(what, text string) { s.parts = append(s.parts, part{what, text}) }

// Errors adds errs as %v, %+v and %#v would print them.
func (s *Sweep) Errors(errs ...error) {
	var b strings.Builder
	for _, err := range errs {
		fmt.Fprintf(&b, "%v\n%+v\n%#v\n", err, err, err)
	}
	s.Add("errors", b.String())
}

// Metrics adds every metric g gathers, names, labels and values.
func (s *Sweep) Metrics(g prometheus.Gatherer) error {
	families, err := g.Gather()
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, f := range families {
		b.WriteString(f.String())
	}
	s.Add("metrics", b.String())
	return nil
}

// RequireNone fails t for every secret found in what was added. The
// failure names where it was found and the secret's first few characters
// only, so the test's own output does not spread it.
func (s *Sweep) RequireNone(t testing.TB, secrets ...string) {
	t.Helper()
	for _, secret := range secrets {
		if secret == "" {
			t.Fatal("capture: an empty secret matches everything")
		}
		for _, p := range s.parts {
			if i := strings.Index(p.text, secret); i >= 0 {
				t.Errorf("a secret (%s…) appears in the %s, at byte %d", secret[:min(len(secret), 6)], p.what, i)
			}
		}
	}
}
