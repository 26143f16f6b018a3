package wire

import (
	"strconv"
	"strings"
)

// The FETCH response (RFC 3501 §7.4.2) as a Conn reads it: UID, FLAGS,
// MODSEQ (RFC 7162 §3.1.4), EMAILID and THREADID (RFC 8474 §5) and Gmail's
// X-GM-MSGID, X-GM-THRID and X-GM-LABELS are kept, every other data item is
// read to its end, literals included, and dropped.

// msgAtt reads a FETCH response's "(" msg-att ")" (RFC 3501 §7.4.2),
// keeping UID, FLAGS and MODSEQ and skipping every other item.
func (d *decoder) msgAtt(f *FetchAttrs) error {
	if err := d.expect('(', "FETCH data"); err != nil {
		return err
	}
	b, err := d.peek()
	if err != nil {
		return err
	}
	if b == ')' {
		_, _ = d.next()
		return nil
	}
	for {
		name, err := d.fetchItemName()
		if err != nil {
			return err
		}
		if err := d.expect(' ', "FETCH data item"); err != nil {
			return err
		}
		switch name {
		case "UID":
			uid, err := d.number32("UID")
			if err != nil {
				return err
			}
			if uid == 0 || (f.HasUID && f.UID != uid) {
				return malformed("FETCH UID")
			}
			f.UID, f.HasUID = uid, true
		case "FLAGS":
			flags, err := d.flagList()
			if err != nil {
				return err
			}
			f.Flags, f.HasFlags = flags, true
		case "MODSEQ":
			if err := d.expect('(', "MODSEQ"); err != nil {
				return err
			}
			tok, err := d.token(isDigit, "MODSEQ")
			if err != nil {
				return err
			}
			m, err := parseModSeq(tok)
			if err != nil {
				return malformed("MODSEQ")
			}
			if err := d.expect(')', "MODSEQ"); err != nil {
				return err
			}
			f.ModSeq, f.HasModSeq = m, true
		case "X-GM-MSGID", "X-GM-THRID":
			tok, err := d.token(isDigit, name)
			if err != nil {
				return err
			}
			if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
				return malformed(name)
			}
			if name == "X-GM-MSGID" {
				f.Identity.EmailID = tok
			} else {
				f.Identity.ThreadID = tok
			}
		case "EMAILID", "THREADID":
			id, err := d.objectID(name)
			if err != nil {
				return err
			}
			if name == "EMAILID" {
				if id == "" {
					return malformed(name)
				}
				f.Identity.EmailID = id
			} else {
				f.Identity.ThreadID = id
			}
		case "X-GM-LABELS":
			labels, err := d.labelList()
			if err != nil {
				return err
			}
			f.Labels, f.HasLabels = labels, true
		default:
			if err := d.skipValue(0); err != nil {
				return err
			}
		}
		c, err := d.next()
		if err != nil {
			return err
		}
		switch c {
		case ')':
			return nil
		case ' ':
		default:
			return malformed("FETCH data")
		}
	}
}

// fetchItemName reads a msg-att name, upper-cased, including a section
// ("BODY[HEADER.FIELDS (DATE)]") and a partial origin ("<0>").
func (d *decoder) fetchItemName() (string, error) {
	name, err := d.token(isItemChar, "FETCH data item")
	if err != nil {
		return "", err
	}
	name = strings.ToUpper(name)
	b, err := d.peek()
	if err != nil {
		return "", err
	}
	if b != '[' {
		return name, nil
	}
	if err := d.skipSection(); err != nil {
		return "", err
	}
	if b, err = d.peek(); err != nil {
		return "", err
	}
	if b == '<' {
		_, _ = d.next()
		if _, err := d.token(isDigit, "partial origin"); err != nil {
			return "", err
		}
		if err := d.expect('>', "partial origin"); err != nil {
			return "", err
		}
	}
	return name + "[]", nil
}

// skipSection reads "[" section "]", which may hold a parenthesized list of
// header names as atoms or quoted strings.
func (d *decoder) skipSection() error {
	_, _ = d.next() // '['
	depth := 0
	for n := 0; n < maxStringBytes; n++ {
		c, err := d.peek()
		if err != nil {
			return err
		}
		switch {
		case c == ']' && depth == 0:
			_, _ = d.next()
			return nil
		case c == '"':
			if _, err := d.quoted(); err != nil {
				return err
			}
			continue
		case c == '(':
			if depth++; depth > maxNesting {
				return malformed("section nesting")
			}
		case c == ')':
			if depth--; depth < 0 {
				return malformed("section")
			}
		case c == '\r' || c == '\n' || c == 0 || c == '{':
			return malformed("section")
		}
		_, _ = d.next()
	}
	return malformed("section too long")
}

// flagList reads "(" [flag *(SP flag)] ")" (RFC 3501 §9 flag-list), keeping
// the flags as sent except the per-session \Recent. The result is never nil.
func (d *decoder) flagList() ([]string, error) {
	if err := d.expect('(', "flag list"); err != nil {
		return nil, err
	}
	flags := []string{}
	n := 0
	for {
		b, err := d.peek()
		if err != nil {
			return nil, err
		}
		if b == ')' {
			_, _ = d.next()
			return flags, nil
		}
		if n > 0 {
			if err := d.expect(' ', "flag list"); err != nil {
				return nil, err
			}
		}
		if n++; n > maxFlags {
			return nil, malformed("too many flags")
		}
		f, err := d.flag()
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(f, flagRecent) {
			flags = append(flags, f)
		}
	}
}

// flag reads "\" atom, "\*" or a keyword atom.
func (d *decoder) flag() (string, error) {
	b, err := d.peek()
	if err != nil {
		return "", err
	}
	if b != '\\' {
		return d.token(isAtomChar, "flag")
	}
	_, _ = d.next()
	if b, err = d.peek(); err != nil {
		return "", err
	}
	if b == '*' {
		_, _ = d.next()
		return `\*`, nil
	}
	a, err := d.token(isAtomChar, "flag")
	if err != nil {
		return "", err
	}
	return `\` + a, nil
}

// flagRecent is IMAP4rev1's per-session \Recent (RFC 3501 §2.3.2), which
// flagList leaves out: it says nothing about the message itself.
const flagRecent = `\Recent`

// maxObjectIDBytes is RFC 8474 §5.1's bound on an objectid: 1 to 255
// characters.
const maxObjectIDBytes = 255

// objectID reads "(" objectid ")" (RFC 8474 §5.1: objectid is 1*255 of
// ALPHA, DIGIT, "_" and "-"), or NIL, which THREADID may answer (§5.2) and
// which is returned as "".
func (d *decoder) objectID(what string) (string, error) {
	b, err := d.peek()
	if err != nil {
		return "", err
	}
	if b != '(' {
		a, err := d.atom(what)
		if err != nil || a != "NIL" {
			return "", malformed(what)
		}
		return "", nil
	}
	_, _ = d.next()
	id, err := d.token(isObjectIDChar, what)
	if err != nil {
		return "", err
	}
	if len(id) > maxObjectIDBytes {
		return "", malformed(what + " too long")
	}
	if err := d.expect(')', what); err != nil {
		return "", err
	}
	return id, nil
}

func isObjectIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// labelList reads X-GM-LABELS' "(" [astring *(SP astring)] ")": a label is
// an atom (system labels as flags, `\Inbox`), a quoted string or a
// literal. The result is never nil; maxFlags bounds its length.
func (d *decoder) labelList() ([]string, error) {
	if err := d.expect('(', "label list"); err != nil {
		return nil, err
	}
	labels := []string{}
	for {
		b, err := d.peek()
		if err != nil {
			return nil, err
		}
		if b == ')' {
			_, _ = d.next()
			return labels, nil
		}
		if len(labels) > 0 {
			if err := d.expect(' ', "label list"); err != nil {
				return nil, err
			}
			if b, err = d.peek(); err != nil {
				return nil, err
			}
		}
		if len(labels) >= maxFlags {
			return nil, malformed("too many labels")
		}
		var label string
		switch b {
		case '"':
			label, err = d.quoted()
		case '{':
			label, err = d.literalString(maxStringBytes, "label too long")
		case '\\':
			label, err = d.flag()
		default:
			label, err = d.token(isAstringChar, "label")
		}
		if err != nil {
			return nil, err
		}
		labels = append(labels, label)
	}
}
