package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCommandsRefused: the command layer sends nothing outside its list,
// and the fetch nothing but FLAGS, UID and MODSEQ.
func TestCommandsRefused(t *testing.T) {
	c := &Conn{sock: &Socket{}}
	for _, name := range []string{"STORE", "UID STORE", "SELECT", "EXPUNGE", "COPY", "APPEND", "FETCH", "UID EXPUNGE"} {
		err := c.run(context.Background(), time.Second, name, "", nil)
		require.Error(t, err, name)
		require.Zero(t, c.tags, "nothing was sent")
	}
	for _, items := range [][]FetchItem{{"BODY[]"}, {"FLAGS", "BODY.PEEK[HEADER]"}, {"RFC822"}, {"ENVELOPE"}, {}} {
		_, err := FlagsFetch{Set: "1:5", Items: items}.args()
		require.ErrorIs(t, err, errFetchRequest, "%v", items)
	}
	_, err := FlagsFetch{Set: "2:*", Items: []FetchItem{FetchFlags}}.args()
	require.Error(t, err, "the only set with * is the whole folder")
	args, err := FlagsFetch{Set: WholeFolder, Items: []FetchItem{FetchFlags, FetchUID}, ChangedSince: 9}.args()
	require.NoError(t, err)
	require.Equal(t, "1:* (FLAGS UID) (CHANGEDSINCE 9)", args)
	_, err = FlagsFetch{Set: "1", Items: []FetchItem{FetchFlags}, Vanished: true}.args()
	require.Error(t, err, "VANISHED needs CHANGEDSINCE")
	args, err = FlagsFetch{Set: "1:5,7", Items: []FetchItem{FetchFlags, FetchUID, FetchModSeq}, ChangedSince: 9, Vanished: true}.args()
	require.NoError(t, err)
	require.Equal(t, "1:5,7 (FLAGS UID MODSEQ) (CHANGEDSINCE 9 VANISHED)", args)
	require.True(t, errors.Is(&malformedError{"x"}, ErrMalformedResponse))
}
