package wire

import "math"

// The responses that carry UIDs: SEARCH (RFC 3501 §7.2.5), ESEARCH (RFC 4731
// §4) and VANISHED (RFC 7162 §3.2.10). Sets are kept as the ranges the
// server sent, never expanded.

// searchNumbers reads the rest of "* SEARCH" (RFC 3501 §7.2.5): numbers,
// and the "(MODSEQ n)" RFC 7162 §3.1.6 may add, collected as ranges of
// consecutive numbers.
func (d *decoder) searchNumbers(r *Response) error {
	for {
		b, err := d.peek()
		if err != nil {
			return err
		}
		if b == '\r' || b == '\n' {
			return d.crlf()
		}
		if err := d.expect(' ', "SEARCH"); err != nil {
			return err
		}
		if b, err = d.peek(); err != nil {
			return err
		}
		switch {
		case b == '\r' || b == '\n':
			continue // a trailing space
		case b == '(':
			if err := d.skipValue(0); err != nil {
				return err
			}
			continue
		}
		n, err := d.number32("SEARCH")
		if err != nil {
			return err
		}
		if n == 0 {
			return malformed("SEARCH number 0")
		}
		if k := len(r.Set); k > 0 && r.Set[k-1].Hi != math.MaxUint32 && r.Set[k-1].Hi+1 == n {
			r.Set[k-1].Hi = n
			continue
		}
		if len(r.Set) >= maxSetRanges {
			return malformed("SEARCH answer too long")
		}
		r.Set = append(r.Set, UIDRange{Lo: n, Hi: n})
	}
}

// esearch reads the rest of "* ESEARCH" (RFC 4731 §4): an optional
// (TAG "tag") correlator, an optional UID indicator and return data, of
// which ALL is kept and anything else skipped.
func (d *decoder) esearch(r *Response) error {
	for {
		b, err := d.peek()
		if err != nil {
			return err
		}
		if b == '\r' || b == '\n' {
			return d.crlf()
		}
		if err := d.expect(' ', "ESEARCH"); err != nil {
			return err
		}
		if b, err = d.peek(); err != nil {
			return err
		}
		if b == '\r' || b == '\n' {
			continue
		}
		if b == '(' {
			if r.HasCorrelator {
				return malformed("ESEARCH correlator")
			}
			_, _ = d.next()
			name, err := d.atom("ESEARCH correlator")
			if err != nil {
				return err
			}
			if name != "TAG" {
				return malformed("ESEARCH correlator")
			}
			if err := d.expect(' ', "ESEARCH correlator"); err != nil {
				return err
			}
			if r.Correlator, err = d.astring(); err != nil {
				return err
			}
			r.HasCorrelator = true
			if err := d.expect(')', "ESEARCH correlator"); err != nil {
				return err
			}
			continue
		}
		name, err := d.atom("ESEARCH return data")
		if err != nil {
			return err
		}
		if name == "UID" {
			r.UIDResult = true
			continue
		}
		if err := d.expect(' ', "ESEARCH return data"); err != nil {
			return err
		}
		switch name {
		case "ALL":
			if r.Set != nil {
				return malformed("ESEARCH ALL twice")
			}
			if r.Set, err = d.sequenceSet(); err != nil {
				return err
			}
		default: // MIN, MAX, COUNT, MODSEQ, extensions
			if err := d.skipValue(0); err != nil {
				return err
			}
		}
	}
}

// vanished reads the rest of "* VANISHED" (RFC 7162 §3.2.10):
// [(EARLIER) SP] known-uids.
func (d *decoder) vanished(r *Response) error {
	if err := d.expect(' ', "VANISHED"); err != nil {
		return err
	}
	b, err := d.peek()
	if err != nil {
		return err
	}
	if b == '(' {
		_, _ = d.next()
		tag, err := d.atom("VANISHED")
		if err != nil {
			return err
		}
		if tag != "EARLIER" {
			return malformed("VANISHED tag")
		}
		if err := d.expect(')', "VANISHED"); err != nil {
			return err
		}
		if err := d.expect(' ', "VANISHED"); err != nil {
			return err
		}
		r.Earlier = true
	}
	if r.Set, err = d.sequenceSet(); err != nil {
		return err
	}
	return d.crlf()
}

// sequenceSet reads a sequence-set of UIDs without "*" (RFC 7162 §7
// known-uids; RFC 4731 ALL of a UID search).
func (d *decoder) sequenceSet() (UIDRanges, error) {
	var set UIDRanges
	for {
		lo, err := d.number32("sequence set")
		if err != nil {
			return nil, err
		}
		hi := lo
		b, err := d.peek()
		if err != nil {
			return nil, err
		}
		if b == ':' {
			_, _ = d.next()
			if hi, err = d.number32("sequence set"); err != nil {
				return nil, err
			}
		}
		if lo == 0 || hi == 0 {
			return nil, malformed("UID 0 in a sequence set")
		}
		if len(set) >= maxSetRanges {
			return nil, malformed("sequence set too long")
		}
		set = append(set, UIDRange{Lo: min(lo, hi), Hi: max(lo, hi)})
		if b, err = d.peek(); err != nil {
			return nil, err
		}
		if b != ',' {
			return set, nil
		}
		_, _ = d.next()
	}
}
