package backwardpass

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMisreportSuspected(t *testing.T) {
	t.Parallel()
	require.False(t, misreportSuspected(9, 10), "too few to be a mass report")
	require.False(t, misreportSuspected(10, 500), "a small share of a large window")
	require.False(t, misreportSuspected(125, 500), "exactly a quarter is not more than a quarter")
	require.True(t, misreportSuspected(126, 500))
	require.True(t, misreportSuspected(10, 20))
}
