package mailsearch

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestFuseByReciprocalRank(t *testing.T) {
	t.Parallel()
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	passage := int16(3)
	lexical := []Hit{{StoredEmailID: a}, {StoredEmailID: b}}
	semantic := []Hit{{StoredEmailID: c, Passage: &passage}, {StoredEmailID: b, Passage: &passage}}
	got := fuse(10, lexical, semantic)
	require.Len(t, got, 3)
	require.Equal(t, b, got[0].StoredEmailID, "second in both rankings beats first in one")
	require.InDelta(t, 2.0/62, got[0].Score, 1e-12)
	require.Equal(t, &passage, got[0].Passage, "the semantic ranking's best passage is kept")
	require.Nil(t, got[1].Passage, "a message only the lexical index found has no passage")
	require.Len(t, fuse(1, lexical, semantic), 1)
}
