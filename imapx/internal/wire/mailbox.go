package wire

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// modifiedBase64 is RFC 3501 §5.1.3's variant of base64: "," instead of
// "/", no padding.
var modifiedBase64 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,").WithPadding(base64.NoPadding)

var errMailboxName = errors.New("imapx: the folder path is not valid UTF-8")

// encodeMailbox encodes a folder path, as ListFolders returns it (decoded),
// in modified UTF-7 (RFC 3501 §5.1.3): printable US-ASCII other than "&"
// stands for itself, "&" is "&-", and every run of other characters is
// their UTF-16 in modified base64 between "&" and "-".
func encodeMailbox(path string) (string, error) {
	if !utf8.ValidString(path) {
		return "", errMailboxName
	}
	var b strings.Builder
	var run []rune
	flush := func() {
		if len(run) == 0 {
			return
		}
		u := utf16.Encode(run)
		raw := make([]byte, 0, 2*len(u))
		for _, c := range u {
			raw = append(raw, byte(c>>8), byte(c))
		}
		b.WriteByte('&')
		b.WriteString(modifiedBase64.EncodeToString(raw))
		b.WriteByte('-')
		run = run[:0]
	}
	for _, r := range path {
		if r >= 0x20 && r <= 0x7e {
			flush()
			if r == '&' {
				b.WriteString("&-")
			} else {
				b.WriteRune(r)
			}
			continue
		}
		run = append(run, r)
	}
	flush()
	return b.String(), nil
}

// quote writes s, which holds only printable US-ASCII, as a quoted string
// (RFC 3501 §4.3).
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// decodeMailbox decodes a mailbox name a server sent, in modified UTF-7
// (RFC 3501 §5.1.3), into the folder path ListFolders would report, and
// spells INBOX, which is case-insensitive (RFC 3501 §5.1), in upper case.
// A name that is not valid modified UTF-7 is returned as it came: it then
// names no folder MailFathom watches, which is all a report about it can
// do.
func decodeMailbox(name string) string {
	if strings.EqualFold(name, "INBOX") {
		return "INBOX"
	}
	if !strings.Contains(name, "&") {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		c := name[i]
		if c != '&' {
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(name[i:], '-')
		if end < 0 {
			return name
		}
		enc := name[i+1 : i+end]
		i += end + 1
		if enc == "" {
			b.WriteByte('&')
			continue
		}
		raw, err := modifiedBase64.DecodeString(enc)
		if err != nil || len(raw)%2 != 0 {
			return name
		}
		u := make([]uint16, len(raw)/2)
		for j := range u {
			u[j] = uint16(raw[2*j])<<8 | uint16(raw[2*j+1])
		}
		for _, r := range utf16.Decode(u) {
			if r == utf8.RuneError {
				return name
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
