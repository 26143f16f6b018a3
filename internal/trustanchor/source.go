package trustanchor

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// InterpretationMode says how a configured trust anchor value is read.
type InterpretationMode int

// The interpretation modes.
const (
	// ReferenceOnly reads the value as a <scheme>:<target> reference and
	// nothing else. It is the default (the zero value): a value that is not
	// a reference fails with ReferenceMalformed, so material pasted where a
	// reference belongs is never used, and never echoed.
	ReferenceOnly InterpretationMode = iota
	// ReferenceOrInline reads a value that parses as a reference as one,
	// and any other value as the material itself. Only PEM works inline.
	ReferenceOrInline
	// InlineOnly reads the value as the material itself, even when it
	// looks like a reference. Only PEM works inline.
	InlineOnly
)

// InterpretationModes lists the modes in documentation order.
var InterpretationModes = []InterpretationMode{ReferenceOnly, ReferenceOrInline, InlineOnly}

// String returns the mode's configuration name.
func (m InterpretationMode) String() string {
	switch m {
	case ReferenceOnly:
		return "ReferenceOnly"
	case ReferenceOrInline:
		return "ReferenceOrInline"
	case InlineOnly:
		return "InlineOnly"
	}
	return fmt.Sprintf("InterpretationMode(%d)", int(m))
}

// Valid reports whether m is one of the three modes.
func (m InterpretationMode) Valid() bool {
	return m == ReferenceOnly || m == ReferenceOrInline || m == InlineOnly
}

// ParseInterpretationMode parses a mode by its name, ignoring case. An empty
// string is ReferenceOnly.
func ParseInterpretationMode(s string) (InterpretationMode, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return ReferenceOnly, nil
	}
	for _, m := range InterpretationModes {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return ReferenceOnly, fmt.Errorf("trustanchor: the interpretation mode is not one of ReferenceOnly, ReferenceOrInline, InlineOnly")
}

// Source is a configured trust anchor value: a parsed reference, or the
// value as written. The zero value means nothing is configured. Build one
// with ParseSource (which reports a malformed reference early), FromValue
// or FromReference.
//
// Printing a Source (fmt, %#v, log/slog) never shows the reference's target
// or the inline value.
type Source struct {
	ref    secret.Reference
	inline string
}

// FromReference returns a Source that resolves ref.
func FromReference(ref secret.Reference) Source { return Source{ref: ref} }

// FromValue returns a Source holding the configured text value, which Load
// reads the way its mode says, exactly as ParseSource would: under
// ReferenceOnly as a reference, under ReferenceOrInline as a reference when
// it parses as one and as the material otherwise, under InlineOnly as the
// material. Only PEM material works inline.
func FromValue(value string) Source { return Source{inline: value} }

// ParseSource reads the configured text value under mode, the way
// configuration binding should: blank is the zero Source (no anchor);
// ReferenceOnly requires a reference and reports anything else as
// ReferenceMalformed; ReferenceOrInline takes a reference when value parses
// as one and the value itself otherwise; InlineOnly always takes the value
// itself. The error never contains value.
func ParseSource(value string, mode InterpretationMode) (Source, error) {
	if strings.TrimSpace(value) == "" {
		return Source{}, nil
	}
	switch mode {
	case ReferenceOnly:
		ref, err := secret.ParseReference(value)
		if err != nil {
			return Source{}, referenceOnlyRefusal(value, err)
		}
		return FromReference(ref), nil
	case ReferenceOrInline:
		if ref, err := secret.ParseReference(value); err == nil {
			return FromReference(ref), nil
		}
		return FromValue(value), nil
	case InlineOnly:
		return FromValue(value), nil
	}
	return Source{}, fmt.Errorf("trustanchor: unknown interpretation mode %d", int(mode))
}

// referenceOnlyRefusal reports a value ReferenceOnly cannot read. Inline
// PEM gets a reason that names the modes accepting it.
func referenceOnlyRefusal(value string, err error) *LoadError {
	if strings.Contains(value, "-----BEGIN ") {
		return &LoadError{Failure: ReferenceMalformed, Reason: "the value holds the material itself, which ReferenceOnly does not accept; reference it as <scheme>:<target>, or select ReferenceOrInline or InlineOnly to accept inline PEM"}
	}
	return fromSecret(err, false)
}

// IsZero reports whether nothing is configured.
func (s Source) IsZero() bool { return s.ref.IsZero() && strings.TrimSpace(s.inline) == "" }

// Reference returns the reference and true when s resolves one.
func (s Source) Reference() (secret.Reference, bool) { return s.ref, !s.ref.IsZero() }

// IsInline reports whether s holds a text value rather than a parsed
// reference; what Load makes of the text depends on the mode.
func (s Source) IsInline() bool { return s.ref.IsZero() && strings.TrimSpace(s.inline) != "" }

// String returns a masked form: the reference's masked form, "inline", or
// "(none)".
func (s Source) String() string {
	switch {
	case !s.ref.IsZero():
		return s.ref.String()
	case s.IsInline():
		return "inline"
	}
	return "(none)"
}

// GoString returns the masked form, so %#v withholds the value too.
func (s Source) GoString() string { return "trustanchor.Source(" + s.String() + ")" }

// LogValue returns the masked form for log/slog.
func (s Source) LogValue() slog.Value { return slog.StringValue(s.String()) }
