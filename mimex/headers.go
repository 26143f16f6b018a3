package mimex

import (
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message/textproto"
)

// addressParser parses one address with RFC 2047 display names decoded by
// the go-message charset tables (what go-message's mail.ParseAddress does).
var addressParser = &mail.AddressParser{WordDecoder: wordDecoder}

var roleHeaders = [...]struct {
	role Role
	key  string
}{
	{RoleSender, "Sender"},
	{RoleFrom, "From"},
	{RoleReplyTo, "Reply-To"},
	{RoleTo, "To"},
	{RoleCc, "Cc"},
	{RoleBcc, "Bcc"},
}

// readHeaderFields fills the header-derived fields of r.
func readHeaderFields(h *textproto.Header, r *Result) {
	for _, rh := range roleHeaders {
		seen := map[string]bool{}
		for _, v := range h.Values(rh.key) {
			for _, p := range parseAddressList(v) {
				if seen[p.Comparison] {
					continue
				}
				seen[p.Comparison] = true
				p.Role = rh.role
				r.Participants = append(r.Participants, p)
			}
		}
	}

	if v := h.Get("Date"); v != "" {
		r.SentAt = parseDate(v)
	}
	if received := h.Values("Received"); len(received) > 0 {
		if i := strings.LastIndexByte(received[0], ';'); i >= 0 {
			r.ReceivedAt = parseDate(received[0][i+1:])
		}
	}

	r.Subject = cleanSubject(decodeWords(h.Get("Subject")))

	if ids := parseMessageIDs(h.Get("Message-Id"), false); len(ids) > 0 {
		r.MessageID = ids[0]
	}
	r.InReplyTo = collapseIDs(nil, parseMessageIDs(h.Get("In-Reply-To"), true))
	var refs []string
	for _, v := range h.Values("References") {
		refs = collapseIDs(refs, parseMessageIDs(v, true))
	}
	r.References = refs
}

func parseDate(v string) *time.Time {
	t, err := mail.ParseDate(strings.TrimSpace(v))
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// cleanSubject removes control characters so the subject cannot span lines it
// never spanned. Header unfolding has already happened. A control character
// that separates words (TAB, LF, VT, FF, CR, NEL — reachable through an
// encoded-word such as =?utf-8?q?a=09b?=) becomes one space, because deleting
// it would join two words into one nobody wrote; every other control
// character is deleted.
func cleanSubject(s string) string {
	clean := true
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	lastSpace := false
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) {
			if unicode.IsSpace(r) && !lastSpace {
				b.WriteByte(' ')
				lastSpace = true
			}
			continue
		}
		b.WriteRune(r)
		lastSpace = r == ' '
	}
	return strings.TrimSpace(b.String())
}

// parseAddressList parses an address-list header value one address at a
// time, so a malformed address costs only itself: the value is split at the
// commas and group delimiters that lie outside quoted strings, comments,
// angle brackets and domain literals, group syntax is flattened to its
// members, and each piece is parsed on its own. A piece the parser refuses is
// dropped, never repaired.
func parseAddressList(v string) []Participant {
	var out []Participant
	for _, piece := range splitAddressList(v) {
		a, err := addressParser.Parse(piece)
		if err != nil || a.Address == "" {
			continue
		}
		written := writtenAddrSpec(piece)
		if written == "" || !sameAddress(written, a.Address) {
			written = formatAddrSpec(a.Address)
		}
		if !utf8.ValidString(written) || hasControl(written) {
			continue
		}
		at := strings.LastIndexByte(written, '@')
		if at <= 0 || at == len(written)-1 {
			continue
		}
		out = append(out, Participant{
			Address:     written,
			Comparison:  strings.ToUpper(written),
			Domain:      written[at+1:],
			DisplayName: cleanSubject(validUTF8(a.Name)),
		})
	}
	return out
}

// sameAddress reports whether the addr-spec recovered from the header text
// denotes the address the parser produced.
func sameAddress(written, parsed string) bool {
	a, err := addressParser.Parse("<" + written + ">")
	return err == nil && a.Address == parsed
}

// formatAddrSpec re-quotes a local part the parser unquoted, the way
// net/mail writes it back. It is used only when the written form could not be
// recovered.
func formatAddrSpec(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return addr
	}
	local, domain := addr[:at], addr[at+1:]
	if isDotAtom(local) {
		return addr
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(local); i++ {
		if local[i] == '"' || local[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(local[i])
	}
	b.WriteString(`"@`)
	b.WriteString(domain)
	return b.String()
}

func isDotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if r == '.' || r >= utf8.RuneSelf || r > ' ' && r < 0x7F && !strings.ContainsRune(`()<>[]:;@\,"`, r) {
			continue
		}
		return false
	}
	return true
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) {
			return true
		}
	}
	return false
}

// splitAddressList splits an address list at top-level ',' and ';', dropping
// a group's display name (the text before a top-level ':').
func splitAddressList(v string) []string {
	var pieces []string
	start := 0
	inQuote, inAngle, inLiteral := false, false, false
	comment := 0
	emit := func(end int) {
		if p := strings.TrimSpace(v[start:end]); p != "" {
			pieces = append(pieces, p)
		}
		start = end + 1
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && (inQuote || comment > 0 || inLiteral):
			i++
		case comment > 0:
			switch c {
			case '(':
				comment++
			case ')':
				comment--
			}
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case inLiteral:
			if c == ']' {
				inLiteral = false
			}
		case c == '"':
			inQuote = true
		case c == '(':
			comment = 1
		case c == '[':
			inLiteral = true
		case c == '<':
			inAngle = true
		case c == '>':
			inAngle = false
		case inAngle:
		case c == ',' || c == ';':
			emit(i)
		case c == ':':
			start = i + 1 // a group: its display name is not an address
		}
	}
	emit(len(v))
	return pieces
}

// writtenAddrSpec recovers the addr-spec as the message wrote it: the content
// of the angle brackets when there are any, the whole piece otherwise, with
// comments and the white space around tokens removed (that is CFWS, not
// content) but quoted strings and domain literals kept as they are, so
// "John Smith"@example.com keeps its quotes and its space.
func writtenAddrSpec(piece string) string {
	spec := piece
	if open := topLevelIndex(piece, '<'); open >= 0 {
		rest := piece[open+1:]
		end := topLevelIndex(rest, '>')
		if end < 0 {
			return ""
		}
		spec = rest[:end]
		// Obsolete source route: "@a,@b:user@example.com".
		if strings.HasPrefix(strings.TrimSpace(spec), "@") {
			if colon := topLevelIndex(spec, ':'); colon >= 0 {
				spec = spec[colon+1:]
			}
		}
	}
	var b strings.Builder
	inQuote, inLiteral := false, false
	comment := 0
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		switch {
		case comment > 0:
			switch c {
			case '\\':
				i++
			case '(':
				comment++
			case ')':
				comment--
			}
		case inQuote || inLiteral:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(spec) {
				i++
				b.WriteByte(spec[i])
			} else if inQuote && c == '"' {
				inQuote = false
			} else if inLiteral && c == ']' {
				inLiteral = false
			}
		case c == '(':
			comment = 1
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		case c == '"':
			inQuote = true
			b.WriteByte(c)
		case c == '[':
			inLiteral = true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// topLevelIndex returns the index of c in s outside quoted strings and
// comments, or -1.
func topLevelIndex(s string, c byte) int {
	inQuote := false
	comment := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\\' && (inQuote || comment > 0):
			i++
		case comment > 0:
			if ch == '(' {
				comment++
			} else if ch == ')' {
				comment--
			}
		case inQuote:
			if ch == '"' {
				inQuote = false
			}
		case ch == '"':
			inQuote = true
		case ch == '(':
			comment = 1
		case ch == c:
			return i
		}
	}
	return -1
}

// parseMessageIDs extracts message identifiers from a Message-ID, In-Reply-To
// or References value. Only what surrounds an identifier is removed — the
// angle brackets and the white space around and just inside them; case and
// interior white space are kept. Text outside angle brackets (the phrase old
// clients put in In-Reply-To, comments) is not an identifier. A value with no
// angle brackets at all is one identifier for Message-ID, and a
// white-space-separated list for the list headers. An identifier that still
// holds a control character (TAB included: no parser leaves one inside an
// identifier), or is not valid UTF-8, is refused rather than repaired.
func parseMessageIDs(v string, list bool) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	var raw []string
	if strings.IndexByte(v, '<') < 0 {
		if list {
			raw = strings.Fields(v)
		} else {
			raw = []string{v}
		}
	} else {
		for i := 0; i < len(v); i++ {
			if v[i] != '<' {
				continue
			}
			// Inside the brackets a quoted string may hold '>'.
			j, inQuote := i+1, false
			for ; j < len(v); j++ {
				c := v[j]
				if inQuote && c == '\\' {
					j++
					continue
				}
				if c == '"' {
					inQuote = !inQuote
				} else if c == '>' && !inQuote {
					break
				}
			}
			end := min(j, len(v))
			raw = append(raw, v[i+1:end])
			i = end
		}
	}
	out := raw[:0]
	for _, id := range raw {
		id = strings.TrimFunc(id, isIDSpace)
		if id == "" || !utf8.ValidString(id) || hasControl(id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

func isIDSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }

// collapseIDs appends ids to dst in order, skipping identifiers already
// present (compared octet for octet).
func collapseIDs(dst, ids []string) []string {
	if len(ids) == 0 {
		return dst
	}
	seen := make(map[string]struct{}, len(dst)+len(ids))
	for _, d := range dst {
		seen[d] = struct{}{}
	}
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		dst = append(dst, id)
	}
	return dst
}
