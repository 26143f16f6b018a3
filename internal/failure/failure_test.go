package failure_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
)

type refused struct{}

func (refused) Error() string    { return "the server refused it" }
func (refused) Identity() string { return "Refused" }

func TestIdentity(t *testing.T) {
	t.Parallel()
	sentinel := failure.New("Sentinel", "something named happened")
	require.Equal(t, "something named happened [Sentinel]", sentinel.Error())

	for _, tc := range []struct {
		name string
		err  error
		want string
		ok   bool
	}{
		{"sentinel", sentinel, "Sentinel", true},
		{"wrapped sentinel", fmt.Errorf("context: %w", sentinel), "Sentinel", true},
		{"a type's own identity", fmt.Errorf("context: %w", refused{}), "Refused", true},
		{"the outermost wins", failure.Wrap("Outer", refused{}), "Outer", true},
		{"joined: the first", errors.Join(refused{}, sentinel), "Refused", true},
		{"unnamed", errors.New("plain"), "", false},
		{"nil", nil, "", false},
	} {
		id, ok := failure.Identity(tc.err)
		require.Equal(t, tc.want, id, tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
	}
}

func TestTextAndWrap(t *testing.T) {
	t.Parallel()
	require.Equal(t, "reason [Id]", failure.Text("reason", "Id"))
	require.Equal(t, "reason [Id]", failure.Text("reason [Id]", "Id"), "an identity already there is not repeated")
	require.Equal(t, "reason", failure.Text("reason", ""))

	w := failure.Wrap("Refused", refused{})
	require.Equal(t, "the server refused it [Refused]", w.Error())
	require.ErrorIs(t, w, refused{})
	again := failure.Wrap("Refused", w)
	require.Equal(t, "the server refused it [Refused]", again.Error())
}
