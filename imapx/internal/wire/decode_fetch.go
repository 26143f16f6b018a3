package wire

import "strings"

// The FETCH response (RFC 3501 §7.4.2) as a Conn reads it: UID, FLAGS and
// MODSEQ (RFC 7162 §3.1.4) are kept, every other data item is read to its
// end, literals included, and dropped.

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
