package wire

import (
	"slices"
	"strconv"
	"strings"
)

// UID sets as a Conn's commands write them and its responses carry them
// (sequence-set, RFC 3501 §9; known-uids, RFC 7162 §7).

// MaxSetBytes bounds the sequence-set of one command line. RFC 7162 §4
// (updating RFC 2683 §3.2.1.5) asks clients to keep command lines to about
// 8192 octets, and Dovecot's imap_max_line_length is 64 KiB; a list of UIDs
// whose compressed set is longer is asked about in several commands
// (ChunkUIDs).
const MaxSetBytes = 7900

// WholeFolder is the sequence-set of every UID of the open folder, the one
// set with "*" a Conn sends (RFC 3501 §9: "*" is the largest UID in use).
const WholeFolder = "1:*"

// validSet reports whether set is a sequence-set of numbers, or WholeFolder.
func validSet(set string) bool {
	return set == WholeFolder || (set != "" && strings.Trim(set, "0123456789:,") == "")
}

// UIDRange is the closed range Lo:Hi, Lo <= Hi, both non-zero.
type UIDRange struct{ Lo, Hi uint32 }

// Chunk is one command's share of a list of UIDs: its sequence-set and
// the UIDs it names.
type Chunk struct {
	Set  string
	UIDs []uint32
}

// ChunkUIDs compresses sorted, distinct, non-zero uids into sequence-sets
// of consecutive runs ("1:500,502,510:512"), each at most maxBytes long.
func ChunkUIDs(uids []uint32, maxBytes int) []Chunk {
	var (
		out   []Chunk
		set   []byte
		start int // index in uids where the current chunk starts
	)
	for i := 0; i < len(uids); {
		j := i
		for j+1 < len(uids) && uids[j+1] == uids[j]+1 {
			j++
		}
		var r []byte
		r = strconv.AppendUint(r, uint64(uids[i]), 10)
		if j > i {
			r = append(r, ':')
			r = strconv.AppendUint(r, uint64(uids[j]), 10)
		}
		sep := 0
		if len(set) > 0 {
			sep = 1
		}
		if len(set) > 0 && len(set)+sep+len(r) > maxBytes {
			out = append(out, Chunk{Set: string(set), UIDs: uids[start:i]})
			set, start, sep = set[:0], i, 0
		}
		if sep == 1 {
			set = append(set, ',')
		}
		set = append(set, r...)
		i = j + 1
	}
	if len(set) > 0 {
		out = append(out, Chunk{Set: string(set), UIDs: uids[start:]})
	}
	return out
}

// UIDRanges is a set of UIDs a server reported, kept as the ranges it sent
// rather than expanded: "1:4294967295" costs one entry.
type UIDRanges []UIDRange

// Normalize sorts and merges overlapping or adjacent ranges.
func (rs UIDRanges) Normalize() UIDRanges {
	if len(rs) < 2 {
		return rs
	}
	slices.SortFunc(rs, func(a, b UIDRange) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if uint64(r.Lo) <= uint64(last.Hi)+1 {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Contains reports whether uid is in rs, which must be normalized (Normalize).
func (rs UIDRanges) Contains(uid uint32) bool {
	_, found := slices.BinarySearchFunc(rs, uid, func(r UIDRange, u uint32) int {
		switch {
		case r.Hi < u:
			return -1
		case r.Lo > u:
			return 1
		}
		return 0
	})
	return found
}
