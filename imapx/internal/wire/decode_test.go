package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeAll decodes every response in raw.
func decodeAll(raw string) ([]*Response, error) {
	d := newDecoder(strings.NewReader(raw))
	var out []*Response
	for {
		r, err := d.readResponse()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func decodeOne(t *testing.T, raw string) *Response {
	t.Helper()
	rs, err := decodeAll(raw)
	require.NoError(t, err, "%q", raw)
	require.Len(t, rs, 1, "%q", raw)
	return rs[0]
}

// TestDecodeDovecotResponses decodes what Dovecot 2.3 sends to the
// reconciliation connection's commands, taken from the wire.
func TestDecodeDovecotResponses(t *testing.T) {
	r := decodeOne(t, "* OK [CAPABILITY IMAP4rev1 SASL-IR ENABLE IDLE CONDSTORE QRESYNC] Dovecot ready.\r\n")
	require.Equal(t, RespStatus, r.Kind)
	require.Equal(t, "OK", r.Status)
	require.Equal(t, "CAPABILITY", r.Code)
	require.Equal(t, []string{"IMAP4rev1", "SASL-IR", "ENABLE", "IDLE", "CONDSTORE", "QRESYNC"}, r.Caps)

	r = decodeOne(t, "* ENABLED QRESYNC\r\n")
	require.Equal(t, RespEnabled, r.Kind)
	require.Equal(t, []string{"QRESYNC"}, r.Caps)
	r = decodeOne(t, "* ENABLED\r\n")
	require.Equal(t, RespEnabled, r.Kind)
	require.Empty(t, r.Caps)

	r = decodeOne(t, "R1 OK Enabled (0.001 + 0.000 secs).\r\n")
	require.Equal(t, RespTagged, r.Kind)
	require.Equal(t, "R1", r.Tag)
	require.Equal(t, "OK", r.Status)

	r = decodeOne(t, "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Label1)\r\n")
	require.Equal(t, RespFlags, r.Kind)
	r = decodeOne(t, "* OK [PERMANENTFLAGS ()] Read-only mailbox.\r\n")
	require.Equal(t, "PERMANENTFLAGS", r.Code)
	r = decodeOne(t, "* OK [PERMANENTFLAGS (\\Answered \\*)] Flags permitted.\r\n")
	require.Equal(t, "PERMANENTFLAGS", r.Code)
	r = decodeOne(t, "* 12 EXISTS\r\n")
	require.Equal(t, RespExists, r.Kind)
	require.Equal(t, uint32(12), r.Num)
	r = decodeOne(t, "* 0 RECENT\r\n")
	require.Equal(t, RespRecent, r.Kind)
	r = decodeOne(t, "* OK [UIDVALIDITY 1796018797] UIDs valid\r\n")
	require.Equal(t, uint32(1796018797), r.UIDValidity)
	r = decodeOne(t, "* OK [UIDNEXT 13] Predicted next UID\r\n")
	require.Equal(t, uint32(13), r.UIDNext)
	r = decodeOne(t, "* OK [HIGHESTMODSEQ 9223372036854775807] Highest\r\n")
	require.Equal(t, uint64(math.MaxInt64), r.HighestModSeq)
	r = decodeOne(t, "* OK [NOMODSEQ] No permanent modsequences\r\n")
	require.Equal(t, "NOMODSEQ", r.Code)
	r = decodeOne(t, "* OK [CLOSED] Previous mailbox closed.\r\n")
	require.Equal(t, "CLOSED", r.Code)
	r = decodeOne(t, "R2 OK [READ-ONLY] Examine completed (0.001 + 0.000 secs).\r\n")
	require.Equal(t, "READ-ONLY", r.Code)
	r = decodeOne(t, "R9 NO [NONEXISTENT] Mailbox doesn't exist: Zeta\r\n")
	require.Equal(t, "NO", r.Status)
	require.Equal(t, "NONEXISTENT", r.Code)

	r = decodeOne(t, "* 4 FETCH (UID 4 FLAGS () MODSEQ (15))\r\n")
	require.Equal(t, RespFetch, r.Kind)
	require.Equal(t, uint32(4), r.Num)
	require.Equal(t, FetchAttrs{UID: 4, Flags: []string{}, ModSeq: 15, HasUID: true, HasFlags: true, HasModSeq: true}, r.Fetch)
	r = decodeOne(t, "* 1 FETCH (UID 1 FLAGS (\\Answered \\Recent $Label1) MODSEQ (13))\r\n")
	require.Equal(t, []string{`\Answered`, "$Label1"}, r.Fetch.Flags, "\\Recent is left out")
	r = decodeOne(t, "* 1 FETCH (FLAGS (\\Seen))\r\n")
	require.False(t, r.Fetch.HasUID)
	require.True(t, r.Fetch.HasFlags)
	r = decodeOne(t, "* 1 FETCH (UID 1 MODSEQ (3))\r\n")
	require.False(t, r.Fetch.HasFlags)

	r = decodeOne(t, "* VANISHED (EARLIER) 7:9,11\r\n")
	require.Equal(t, RespVanished, r.Kind)
	require.True(t, r.Earlier)
	require.Equal(t, UIDRanges{{7, 9}, {11, 11}}, r.Set)
	r = decodeOne(t, "* VANISHED 300:200,5\r\n")
	require.False(t, r.Earlier)
	require.Equal(t, UIDRanges{{200, 300}, {5, 5}}, r.Set)
	r = decodeOne(t, "* vanished (earlier) 1:4294967295\r\n")
	require.Equal(t, UIDRanges{{1, math.MaxUint32}}, r.Set)

	r = decodeOne(t, "* SEARCH 1 2 3 5 7 8\r\n")
	require.Equal(t, RespSearch, r.Kind)
	require.Equal(t, UIDRanges{{1, 3}, {5, 5}, {7, 8}}, r.Set)
	r = decodeOne(t, "* SEARCH\r\n")
	require.Empty(t, r.Set)
	r = decodeOne(t, "* SEARCH 2 5 6 (MODSEQ 917162500)\r\n")
	require.Equal(t, UIDRanges{{2, 2}, {5, 6}}, r.Set)
	r = decodeOne(t, "* SEARCH 4294967295\r\n")
	require.Equal(t, UIDRanges{{math.MaxUint32, math.MaxUint32}}, r.Set)

	r = decodeOne(t, "* ESEARCH (TAG \"R4\") UID ALL 1:3,5\r\n")
	require.Equal(t, RespESearch, r.Kind)
	require.Equal(t, "R4", r.Correlator)
	require.True(t, r.UIDResult)
	require.Equal(t, UIDRanges{{1, 3}, {5, 5}}, r.Set)
	r = decodeOne(t, "* ESEARCH (TAG \"R4\") UID\r\n")
	require.True(t, r.UIDResult)
	require.Nil(t, r.Set)
	r = decodeOne(t, "* ESEARCH (TAG \"R4\") UID MIN 1 MAX 9 COUNT 4 ALL 1:2,8:9 MODSEQ 3\r\n")
	require.Equal(t, UIDRanges{{1, 2}, {8, 9}}, r.Set)
	r = decodeOne(t, "* ESEARCH (TAG {2}\r\nR4) UID ALL 1\r\n")
	require.Equal(t, "R4", r.Correlator)

	r = decodeOne(t, "* BYE Logging out\r\n")
	require.Equal(t, "BYE", r.Status)
	r = decodeOne(t, "+ Ready for additional command text\r\n")
	require.Equal(t, RespContinue, r.Kind)
}

// TestDecodeLeniency: bare LF line endings, missing texts, trailing spaces,
// lower case.
func TestDecodeLeniency(t *testing.T) {
	rs, err := decodeAll("* 2 EXISTS\n* OK\r\nR1 OK\nR2 ok [read-only]\r\n* SEARCH 1 2 \r\n* capability imap4rev1 \r\n")
	require.NoError(t, err)
	require.Len(t, rs, 6)
	require.Equal(t, "OK", rs[3].Status)
	require.Equal(t, "READ-ONLY", rs[3].Code)
	require.Equal(t, UIDRanges{{1, 2}}, rs[4].Set)
	require.Equal(t, []string{"imap4rev1"}, rs[5].Caps)

	// The line ending go-imap may leave unread before the takeover.
	d := newDecoder(strings.NewReader("\r\n* 1 EXISTS\r\n"))
	d.skipBlank = true
	r, err := d.readResponse()
	require.NoError(t, err)
	require.Equal(t, RespExists, r.Kind)
	_, err = newDecoder(strings.NewReader("\r\n* 1 EXISTS\r\n")).readResponse()
	require.ErrorIs(t, err, ErrMalformedResponse, "only right after the takeover")
}

// TestDecodeSkipsWhatItDoesNotUse: other FETCH items, sections, literals
// and unknown responses are read to their end and dropped.
func TestDecodeSkipsWhatItDoesNotUse(t *testing.T) {
	raw := "* 3 FETCH (UID 9 RFC822.SIZE 44 INTERNALDATE \"01-Jan-2024 10:00:00 +0000\" " +
		"ENVELOPE (NIL \"subj\" ((\"a\" NIL \"b\" \"c\")) NIL NIL NIL NIL NIL NIL \"<id>\") " +
		"BODY[HEADER.FIELDS (SUBJECT \"DATE\")]<0> {7}\r\nab)\r\n(\" " +
		"BINARY[1] ~{3}\r\n\x00\x01\x02 X-FOO-ITEM (\\Inbox \"a b\") FLAGS (\\Seen))\r\n" +
		"* LIST (\\HasNoChildren) \"/\" {5}\r\nR1 OK\r\n" +
		"* METADATA unbalanced ( text {x}\r\n" +
		"* 5 XFOO bar {3}\r\nabc tail\r\n" +
		"* ID (\"name\" \"Dovecot\")\r\n" +
		"R7 OK done\r\n"
	rs, err := decodeAll(raw)
	require.NoError(t, err)
	require.Len(t, rs, 6)
	require.Equal(t, FetchAttrs{UID: 9, Flags: []string{`\Seen`}, HasUID: true, HasFlags: true}, rs[0].Fetch)
	for _, r := range rs[1:5] {
		require.Equal(t, RespOther, r.Kind)
	}
	require.Equal(t, "R7", rs[5].Tag)
}

// TestDecodeRefusesMalformed: each of these is an ErrMalformedResponse,
// never a panic and never a response.
func TestDecodeRefusesMalformed(t *testing.T) {
	for name, raw := range map[string]string{
		"no space after *":        "*OK\r\n",
		"bad tagged status":       "R1 MAYBE\r\n",
		"tag with +":              "R+1 OK\r\n",
		"FETCH without list":      "* 1 FETCH UID 1\r\n",
		"FETCH unterminated":      "* 1 FETCH (UID 1 FLAGS (\\Seen)\r\n",
		"FETCH of message 0":      "* 0 FETCH (UID 1)\r\n",
		"UID 0":                   "* 1 FETCH (UID 0 FLAGS ())\r\n",
		"two UIDs":                "* 1 FETCH (UID 1 UID 2 FLAGS ())\r\n",
		"UID over 32 bits":        "* 1 FETCH (UID 4294967296 FLAGS ())\r\n",
		"modseq over 63 bits":     "* 1 FETCH (UID 1 MODSEQ (9223372036854775808))\r\n",
		"modseq not a list":       "* 1 FETCH (UID 1 MODSEQ 5)\r\n",
		"flag with paren":         "* 1 FETCH (UID 1 FLAGS (\\Se(en))\r\n",
		"lone backslash":          "* 1 FETCH (UID 1 FLAGS (\\))\r\n",
		"NUL in flags":            "* 1 FETCH (UID 1 FLAGS (a\x00))\r\n",
		"too many flags":          "* 1 FETCH (UID 1 FLAGS (" + strings.Repeat("a ", maxFlags) + "a))\r\n",
		"long flag":               "* 1 FETCH (UID 1 FLAGS (" + strings.Repeat("a", maxTokenBytes+1) + "))\r\n",
		"deep lists":              "* 1 FETCH (UID 1 X " + strings.Repeat("(", maxNesting+1) + strings.Repeat(")", maxNesting+1) + ")\r\n",
		"literal beyond budget":   "* 1 FETCH (UID 1 BODY[] {4194305}\r\n",
		"literal length overflow": "* 1 FETCH (UID 1 BODY[] {99999999999999999999}\r\n",
		"literal in section":      "* 1 FETCH (UID 1 BODY[HEADER.FIELDS {3}\r\nabc] NIL)\r\n",
		"unterminated quote":      "* 1 FETCH (UID 1 X \"abc\r\n\")\r\n",
		"VANISHED star":           "* VANISHED (EARLIER) 1:*\r\n",
		"VANISHED zero":           "* VANISHED 0:5\r\n",
		"VANISHED other tag":      "* VANISHED (LATER) 1\r\n",
		"VANISHED empty":          "* VANISHED \r\n",
		"SEARCH 0":                "* SEARCH 0\r\n",
		"SEARCH range":            "* SEARCH 1:5\r\n",
		"ESEARCH twice ALL":       "* ESEARCH UID ALL 1 ALL 2\r\n",
		"ESEARCH bad correlator":  "* ESEARCH (FOO \"x\") UID\r\n",
		"UIDVALIDITY 0":           "* OK [UIDVALIDITY 0] x\r\n",
		"UIDVALIDITY text":        "* OK [UIDVALIDITY abc] x\r\n",
		"HIGHESTMODSEQ huge":      "* OK [HIGHESTMODSEQ 18446744073709551616] x\r\n",
		"code unterminated":       "* OK [ALERT x\r\n",
		"text too long":           "* OK " + strings.Repeat("x", maxStringBytes+1) + "\r\n",
		"NUL in text":             "* OK a\x00b\r\n",
		"NUL in unknown":          "* XYZZY a\x00b\r\n",
		"CR without LF":           "* 1 EXISTS\rX\n",
		"response too large":      "* SEARCH " + strings.Repeat("1 ", maxResponseBytes/2) + "\r\n",
		"empty atom":              "*  OK\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeAll(raw)
			require.ErrorIs(t, err, ErrMalformedResponse, "%.80q", raw)
			require.NotContains(t, err.Error(), "abc")
		})
	}
}

// TestDecodeTruncated: a stream that ends inside a response is an
// unexpected end of file, which the connection layer reports as a lost
// connection; one that ends between responses is an ordinary end.
func TestDecodeTruncated(t *testing.T) {
	full := "* 1 FETCH (UID 1 FLAGS (\\Seen) BODY[] {5}\r\nabcde)\r\n"
	for i := 1; i < len(full); i++ {
		_, err := decodeAll(full[:i])
		require.Error(t, err, "%q", full[:i])
		require.True(t, errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrMalformedResponse), "%q: %v", full[:i], err)
	}
	rs, err := decodeAll(full)
	require.NoError(t, err)
	require.Len(t, rs, 1)
}

// TestDecodeBoundedMemory: a range covering every UID is one entry, and a
// SEARCH answer listing many UIDs is kept as ranges.
func TestDecodeBoundedMemory(t *testing.T) {
	var b strings.Builder
	b.WriteString("* SEARCH")
	for i := 1; i <= 100_000; i++ {
		b.WriteString(" " + strconv.Itoa(i))
	}
	b.WriteString("\r\n")
	r := decodeOne(t, b.String())
	require.Equal(t, UIDRanges{{1, 100_000}}, r.Set)
}

func TestChunkUIDs(t *testing.T) {
	require.Empty(t, ChunkUIDs(nil, 100))
	require.Equal(t, []Chunk{{Set: "7", UIDs: []uint32{7}}}, ChunkUIDs([]uint32{7}, 100))
	contiguous := make([]uint32, 10_000)
	for i := range contiguous {
		contiguous[i] = uint32(i + 1)
	}
	require.Equal(t, []Chunk{{Set: "1:10000", UIDs: contiguous}}, ChunkUIDs(contiguous, MaxSetBytes))
	require.Equal(t, "1:3,5,7:8,4294967295", ChunkUIDs([]uint32{1, 2, 3, 5, 7, 8, math.MaxUint32}, 100)[0].Set)

	var scattered []uint32
	for i := uint32(1); i <= 30_000; i += 3 {
		scattered = append(scattered, i, i+1)
	}
	chunks := ChunkUIDs(scattered, 200)
	require.Greater(t, len(chunks), 10)
	var back []uint32
	for _, c := range chunks {
		require.LessOrEqual(t, len(c.Set), 200)
		back = append(back, c.UIDs...)
		// The set names exactly the chunk's UIDs.
		d := newDecoder(strings.NewReader(c.Set + "\r\n"))
		d.budget = maxResponseBytes
		set, err := d.sequenceSet()
		require.NoError(t, err)
		var named []uint32
		for _, r := range set {
			for u := r.Lo; u <= r.Hi; u++ {
				named = append(named, u)
			}
		}
		require.Equal(t, c.UIDs, named)
	}
	require.Equal(t, scattered, back)
}

func TestUIDRanges(t *testing.T) {
	rs := UIDRanges{{10, 20}, {1, 3}, {4, 5}, {15, 30}, {math.MaxUint32, math.MaxUint32}}.Normalize()
	require.Equal(t, UIDRanges{{1, 5}, {10, 30}, {math.MaxUint32, math.MaxUint32}}, rs)
	for uid, want := range map[uint32]bool{1: true, 5: true, 6: false, 9: false, 10: true, 30: true, 31: false, math.MaxUint32: true} {
		require.Equal(t, want, rs.Contains(uid), uid)
	}
	require.False(t, UIDRanges(nil).Contains(1))
}

// TestDecodeStatusNamesTheFolder: an unsolicited STATUS response, as a
// NOTIFY subscription delivers it, is read for the folder it names and
// nothing else; every form of mailbox name decodes to the path ListFolders
// reports.
func TestDecodeStatusNamesTheFolder(t *testing.T) {
	for raw, want := range map[string]string{
		"* STATUS INBOX (MESSAGES 3 UIDNEXT 9)\r\n":                          "INBOX",
		"* STATUS inbox (MESSAGES 3)\r\n":                                    "INBOX",
		"* STATUS \"Sent Items\" (MESSAGES 3 UIDNEXT 9 UNSEEN 0)\r\n":        "Sent Items",
		"* STATUS Archive/2026 (HIGHESTMODSEQ 18446744073709551615)\r\n":     "Archive/2026",
		"* STATUS {9}\r\nA&-B ]x\"y (MESSAGES 1)\r\n":                        `A&B ]x"y`,
		"* STATUS \"~peter/mail/&U,BTFw-/&ZeVnLIqe-\" (UIDNEXT 2)\r\n":       "~peter/mail/台北/日本語",
		"* STATUS \"&ANoBDQ-ty &- Zpr&AOE-vy\" ()\r\n":                       "Účty & Zprávy",
		"* STATUS \"bad &AB- utf7\" (MESSAGES 1)\r\n":                        "bad &AB- utf7",
		"* STATUS Trash (MESSAGES 1 X-UNKNOWN (nested list) UIDNEXT 2) \r\n": "Trash",
	} {
		r := decodeOne(t, raw)
		require.Equal(t, RespMailboxStatus, r.Kind, "%q", raw)
		require.Equal(t, want, r.Mailbox, "%q", raw)
		require.Zero(t, r.UIDNext, "no number of a report is read")
		require.Zero(t, r.HighestModSeq)
	}
	for name, raw := range map[string]string{
		"no list":          "* STATUS INBOX\r\n",
		"list not a list":  "* STATUS INBOX MESSAGES 3\r\n",
		"unbalanced":       "* STATUS INBOX (MESSAGES 3\r\n",
		"no mailbox":       "* STATUS  (MESSAGES 3)\r\n",
		"huge literal":     "* STATUS {65537}\r\n",
		"trailing garbage": "* STATUS INBOX () x\r\n",
	} {
		_, err := decodeAll(raw)
		require.ErrorIs(t, err, ErrMalformedResponse, name)
	}
	for in := range map[string]bool{"INBOX": true, "Sent Items": true, "A&B": true, "台北/日本語": true, "😀 x": true} {
		enc, err := encodeMailbox(in)
		require.NoError(t, err)
		require.Equal(t, in, decodeMailbox(enc))
	}
}

// TestDecodeStatusItems: the items a STATUS response describes a folder
// with are read — MESSAGES, UIDNEXT, UIDVALIDITY, HIGHESTMODSEQ, as
// Dovecot sends them after NOTIFY SET STATUS — and anything else in the
// list is read to its end and dropped.
func TestDecodeStatusItems(t *testing.T) {
	for raw, want := range map[string]StatusItems{
		"* STATUS Sent (MESSAGES 2 UIDNEXT 3 UIDVALIDITY 1767225600 UNSEEN 2 HIGHESTMODSEQ 5)\r\n": {Messages: 2, UIDNext: 3, UIDValidity: 1767225600, HighestModSeq: 5},
		"* STATUS Trash (messages 1 X-UNKNOWN (nested list) uidnext 2) \r\n":                       {Messages: 1, UIDNext: 2},
		"* STATUS Archive (HIGHESTMODSEQ 9223372036854775807 )\r\n":                                {HighestModSeq: 1<<63 - 1},
		"* STATUS Junk ()\r\n": {},
	} {
		r := decodeOne(t, raw)
		require.Equal(t, RespMailboxStatus, r.Kind, "%q", raw)
		require.Equal(t, want, r.Items, "%q", raw)
	}
	for name, raw := range map[string]string{
		"item without a value": "* STATUS INBOX (MESSAGES)\r\n",
		"value not a number":   "* STATUS INBOX (UIDNEXT x)\r\n",
		"no space between":     "* STATUS INBOX (MESSAGES 1UIDNEXT 2)\r\n",
		"modseq above 64 bits": "* STATUS INBOX (HIGHESTMODSEQ 18446744073709551616)\r\n",
	} {
		_, err := decodeAll(raw)
		require.ErrorIs(t, err, ErrMalformedResponse, name)
	}
}

// TestChangeNamesOnlyTheFolder: which responses report a change, and in
// which folder; none carries anything else out.
func TestChangeNamesOnlyTheFolder(t *testing.T) {
	c := &Conn{}
	rs, err := decodeAll("* 5 EXISTS\r\n* 2 EXPUNGE\r\n* 3 FETCH (FLAGS (\\Seen))\r\n* VANISHED 4\r\n* 1 RECENT\r\n* OK [UIDNEXT 9] x\r\n* STATUS Sent (MESSAGES 2)\r\n")
	require.NoError(t, err)
	var got []string
	for _, r := range rs {
		if f, ok := c.Change(r); ok {
			got = append(got, f)
		}
	}
	require.Equal(t, []string{"Sent"}, got, "with no folder open only a STATUS names one")
	c.folder = "INBOX"
	got = nil
	for _, r := range rs {
		if f, ok := c.Change(r); ok {
			got = append(got, f)
		}
	}
	require.Equal(t, []string{"INBOX", "INBOX", "INBOX", "INBOX", "Sent"}, got)
}

func TestEncodeMailbox(t *testing.T) {
	for in, want := range map[string]string{
		"INBOX":                   "INBOX",
		"Sent Items":              "Sent Items",
		"A&B":                     "A&-B",
		"~peter/mail/台北/日本語":      "~peter/mail/&U,BTFw-/&ZeVnLIqe-", // RFC 3501 §5.1.3
		"Účty & Zprávy":           "&ANoBDQ-ty &- Zpr&AOE-vy",
		"😀":                       "&2D3eAA-",
		`Quote " and \ backslash`: `Quote " and \ backslash`,
	} {
		got, err := encodeMailbox(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	_, err := encodeMailbox("bad \xff utf-8")
	require.Error(t, err)
	require.Equal(t, `"Quote \" and \\ backslash"`, quote(`Quote " and \ backslash`))
}

// fuzzSeeds are responses of every kind the decoder reads, and a few it
// skips.
var fuzzSeeds = []string{
	"* OK [CAPABILITY IMAP4rev1 CONDSTORE QRESYNC] ready\r\n",
	"* ENABLED QRESYNC\r\nR1 OK Enabled\r\n",
	"* FLAGS (\\Answered \\Seen $Label1)\r\n* OK [PERMANENTFLAGS (\\*)] x\r\n* 12 EXISTS\r\n* 0 RECENT\r\n",
	"* OK [UIDVALIDITY 1796018797] x\r\n* OK [UIDNEXT 13] x\r\n* OK [HIGHESTMODSEQ 21] x\r\nR2 OK [READ-ONLY] done\r\n",
	"* VANISHED (EARLIER) 7:9,11\r\n* 2 FETCH (UID 2 FLAGS (\\Flagged) MODSEQ (14))\r\nR5 OK done\r\n",
	"* VANISHED 4\r\n* 3 EXPUNGE\r\n",
	"* SEARCH 1 2 3 (MODSEQ 5)\r\n* ESEARCH (TAG \"R4\") UID ALL 1:3,5 COUNT 4\r\n",
	"* 1 FETCH (UID 1 BODY[HEADER.FIELDS (SUBJECT)]<0> {5}\r\nab)\r\n FLAGS ())\r\n",
	"* LIST (\\HasNoChildren) \"/\" {5}\r\nR1 OK\r\n",
	"+ go ahead\r\n* BYE bye\r\n",
	"\r\n* 1 EXISTS\n",
	"* STATUS \"Sent Items\" (MESSAGES 3 UIDNEXT 9 UNSEEN 1)\r\n* STATUS INBOX (HIGHESTMODSEQ 7)\r\n",
	"* STATUS {5}\r\nA&-B] ()\r\n* OK [NOTIFICATIONOVERFLOW] x\r\n+ idling\r\nR3 OK done\r\n",
}

// FuzzDecodeResponses feeds arbitrary bytes to the decoder: it must end
// with a response, the end of the stream or ErrMalformedResponse, never
// panic, never read past a response's budget and never return a value that
// breaks the invariants its callers rely on.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(bytes.NewReader(data))
		d.skipBlank = len(data) > 0 && data[0]&1 == 1
		for range 1000 {
			r, err := d.readResponse()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrMalformedResponse) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			if d.budget < 0 {
				t.Fatalf("budget overrun: %d", d.budget)
			}
			checkInvariants(t, r)
			checkChange(t, r)
		}
	})
}

// checkChange: a response reports a change in at most one folder, the one
// it names or the open one, and a STATUS names a folder whenever it
// decoded.
func checkChange(t *testing.T, r *Response) {
	c := &Conn{folder: "open"}
	f, ok := c.Change(r)
	switch r.Kind {
	case RespMailboxStatus:
		if !ok || f != r.Mailbox || f == "" {
			t.Fatalf("STATUS change %q %v", f, ok)
		}
	case RespExists, RespExpunge, RespFetch, RespVanished:
		if !ok || f != "open" {
			t.Fatalf("change in the open folder reported as %q %v", f, ok)
		}
	default:
		if ok {
			t.Fatalf("%v reported a change", r.Kind)
		}
	}
}

func checkInvariants(t *testing.T, r *Response) {
	for _, rg := range r.Set {
		if rg.Lo == 0 || rg.Lo > rg.Hi {
			t.Fatalf("bad range %v", rg)
		}
	}
	if len(r.Set) > maxSetRanges {
		t.Fatalf("%d ranges", len(r.Set))
	}
	f := r.Fetch
	if f.HasFlags && f.Flags == nil {
		t.Fatal("FLAGS present but nil")
	}
	if len(f.Flags) > maxFlags {
		t.Fatalf("%d flags", len(f.Flags))
	}
	if f.HasUID && f.UID == 0 {
		t.Fatal("UID 0")
	}
	if f.ModSeq > math.MaxInt64 || r.HighestModSeq > math.MaxInt64 {
		t.Fatal("mod-sequence above 63 bits")
	}
	switch r.Kind {
	case RespTagged:
		if r.Tag == "" || strings.Contains(r.Tag, "+") || !slices.Contains([]string{"OK", "NO", "BAD"}, r.Status) {
			t.Fatalf("bad tagged response %q %q", r.Tag, r.Status)
		}
	case RespFetch, RespExpunge:
		if r.Num == 0 {
			t.Fatal("message number 0")
		}
	}
}

// FuzzLiteralCannotDesynchronize: whatever a literal holds, the decoder
// reads it by its length and the next response is the one after it.
func FuzzLiteralCannotDesynchronize(f *testing.F) {
	f.Add([]byte("R1 OK done\r\n"), false)
	f.Add([]byte("\r\n* 1 FETCH (UID 2 FLAGS (\\Deleted))\r\n"), true)
	f.Add([]byte("{5}\r\n)))))"), false)
	f.Fuzz(func(t *testing.T, content []byte, literal8 bool) {
		if len(content) > 1<<16 {
			return
		}
		marker := ""
		if literal8 {
			marker = "~"
		}
		raw := fmt.Sprintf("* 1 FETCH (UID 1 BODY[] %s{%d}\r\n%s FLAGS (\\Seen))\r\n* 2 FETCH (UID 2 X {%d+}\r\n%s)\r\nR1 OK done\r\n",
			marker, len(content), content, len(content), content)
		rs, err := decodeAll(raw)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(rs) != 3 || rs[0].Fetch.UID != 1 || !slices.Equal(rs[0].Fetch.Flags, []string{`\Seen`}) ||
			rs[1].Fetch.UID != 2 || rs[1].Fetch.HasFlags || rs[2].Tag != "R1" {
			t.Fatalf("desynchronized: %d responses", len(rs))
		}
	})
}
