package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeGmailIdentity decodes X-GM-MSGID, X-GM-THRID and X-GM-LABELS
// as Gmail sends them: decimal identities, labels as system flags, atoms,
// quoted strings and literals.
func TestDecodeGmailIdentity(t *testing.T) {
	t.Parallel()
	r := decodeOne(t, "* 3 FETCH (X-GM-THRID 1278455344230334865 X-GM-MSGID 1278455344230334866 "+
		"X-GM-LABELS (\\Inbox \\Important Work \"Project X\" {5}\r\nl\"b l) UID 7 FLAGS (\\Seen) MODSEQ (42))\r\n")
	require.Equal(t, RespFetch, r.Kind)
	require.Equal(t, uint32(7), r.Fetch.UID)
	require.Equal(t, "1278455344230334866", r.Fetch.Identity.EmailID)
	require.Equal(t, "1278455344230334865", r.Fetch.Identity.ThreadID)
	require.True(t, r.Fetch.HasLabels)
	require.Equal(t, []string{`\Inbox`, `\Important`, "Work", "Project X", `l"b l`}, r.Fetch.Labels)
	require.Equal(t, []string{`\Seen`}, r.Fetch.Flags)
	require.Equal(t, uint64(42), r.Fetch.ModSeq)

	r = decodeOne(t, "* 1 FETCH (UID 2 X-GM-LABELS ())\r\n")
	require.True(t, r.Fetch.HasLabels)
	require.NotNil(t, r.Fetch.Labels)
	require.Empty(t, r.Fetch.Labels)
}

// TestDecodeObjectID decodes RFC 8474's EMAILID and THREADID, the NIL
// THREADID of a message in no thread included.
func TestDecodeObjectID(t *testing.T) {
	t.Parallel()
	r := decodeOne(t, "* 1 FETCH (UID 5 EMAILID (M6d99ac3275bb4e) THREADID (T64b478a75b7ea9))\r\n")
	require.Equal(t, Identity{EmailID: "M6d99ac3275bb4e", ThreadID: "T64b478a75b7ea9"}, r.Fetch.Identity)
	r = decodeOne(t, "* 1 FETCH (UID 5 EMAILID (M1) THREADID NIL)\r\n")
	require.Equal(t, Identity{EmailID: "M1"}, r.Fetch.Identity)
}

// TestDecodeRefusesMalformedIdentity refuses identities outside their
// grammar rather than keeping something else as a message's identity.
func TestDecodeRefusesMalformedIdentity(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"* 1 FETCH (UID 5 X-GM-MSGID 99999999999999999999999)\r\n", // above 64 bits
		"* 1 FETCH (UID 5 X-GM-MSGID abc)\r\n",
		"* 1 FETCH (UID 5 EMAILID NIL)\r\n",
		"* 1 FETCH (UID 5 EMAILID (M.1))\r\n",
		"* 1 FETCH (UID 5 EMAILID M1)\r\n",
		"* 1 FETCH (UID 5 X-GM-LABELS (a  b))\r\n",
		"* 1 FETCH (UID 5 X-GM-LABELS a)\r\n",
	} {
		_, err := decodeAll(raw)
		require.ErrorIs(t, err, ErrMalformedResponse, "%q", raw)
	}
}
