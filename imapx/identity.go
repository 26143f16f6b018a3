package imapx

import (
	"context"
	"log/slog"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// IdentityScheme is how a server names a message across its folders.
type IdentityScheme string

// The identity schemes, by the capability that offers them.
const (
	// NoIdentity: the server says nothing about which occurrences are one
	// message; each occurrence is a message of its own.
	NoIdentity IdentityScheme = ""
	// GmailIdentity: X-GM-EXT-1, Gmail's X-GM-MSGID, X-GM-THRID and
	// X-GM-LABELS. One message carries one X-GM-MSGID in every folder
	// (label) it is shown in.
	GmailIdentity IdentityScheme = "x-gm-msgid"
	// ObjectIdentity: OBJECTID (RFC 8474), EMAILID and THREADID. A message
	// copied to another folder keeps its EMAILID (§5.1).
	ObjectIdentity IdentityScheme = "emailid"
)

// CapGmail is Gmail's extension capability.
const CapGmail imap.Cap = "X-GM-EXT-1"

// CapObjectID is RFC 8474's capability.
const CapObjectID imap.Cap = "OBJECTID"

// identitySchemeFor prefers Gmail's identity, which also carries labels,
// over OBJECTID.
func identitySchemeFor(caps imap.CapSet) IdentityScheme {
	switch {
	case caps.Has(CapGmail):
		return GmailIdentity
	case caps.Has(CapObjectID):
		return ObjectIdentity
	}
	return NoIdentity
}

// IdentityScheme is the scheme the server advertised after authentication.
func (s *ReadSession) IdentityScheme() IdentityScheme {
	return identitySchemeFor(s.caps)
}

// MessageIdentity is the server's statement of what a message is.
type MessageIdentity struct {
	// EmailID is X-GM-MSGID (decimal) or EMAILID, never "" in an answer.
	EmailID string
	// ThreadID is X-GM-THRID or THREADID, "" when the server sent none.
	ThreadID string
	// Labels are the message's X-GM-LABELS as Gmail sent them (`\Inbox`,
	// `\Important`, user labels); nil under ObjectIdentity.
	Labels []string
}

// identityItems are the FETCH items of scheme.
func identityItems(scheme IdentityScheme) []wire.FetchItem {
	switch scheme {
	case GmailIdentity:
		return []wire.FetchItem{wire.FetchGmailMsgID, wire.FetchGmailThrID, wire.FetchGmailLabels}
	case ObjectIdentity:
		return []wire.FetchItem{wire.FetchEmailID, wire.FetchThreadID}
	}
	return nil
}

// FetchIdentities asks the server for the identity of uids in the open
// folder: UID FETCH <set> (UID X-GM-MSGID X-GM-THRID X-GM-LABELS) on Gmail,
// (UID EMAILID THREADID) under OBJECTID. Both are answered from folder
// state, like FLAGS, so nothing about the message changes. It returns an
// entry per UID the server identified; a UID expunged meanwhile, or one
// the server answered without an identity, is absent. With NoIdentity it
// returns nil without asking anything.
//
// The question goes over the session's reconciliation connection (go-imap
// cannot parse these items), the folder examined afresh on it; the errors
// are those of Reconcile.
func (s *ReadSession) FetchIdentities(ctx context.Context, uids []uint32) (map[uint32]MessageIdentity, error) {
	scheme := s.IdentityScheme()
	if scheme == NoIdentity {
		return nil, nil
	}
	if err := s.openFolder(); err != nil {
		return nil, err
	}
	window, err := normalizeWindow(uids)
	if err != nil || len(window) == 0 {
		return nil, err
	}
	start := time.Now()
	w, _, err := s.reconcileFolder(ctx)
	if err != nil {
		return nil, err
	}
	items := append([]wire.FetchItem{wire.FetchUID}, identityItems(scheme)...)
	answered := map[uint32]*wire.FetchAttrs{}
	for _, ch := range wire.ChunkUIDs(window, wire.MaxSetBytes) {
		err := fromWire(w.UIDFetchFlags(ctx, s.opts.commandTimeout(), wire.FlagsFetch{Set: ch.Set, Items: items},
			func(r *wire.Response) {
				if r.Kind == wire.RespFetch && r.Fetch.HasUID {
					mergeFetch(answered, r.Fetch)
				}
			}))
		if err != nil {
			return nil, err
		}
	}
	out := make(map[uint32]MessageIdentity, len(answered))
	for uid, a := range answered {
		if a.Identity.EmailID == "" {
			continue
		}
		id := MessageIdentity{EmailID: a.Identity.EmailID, ThreadID: a.Identity.ThreadID}
		if scheme == GmailIdentity && a.HasLabels {
			id.Labels = a.Labels
		}
		out[uid] = id
	}
	s.debug(ctx, "imap fetch identities", slog.String("scheme", string(scheme)), slog.Int("requested", len(window)),
		slog.Int("identified", len(out)), slog.Duration("elapsed", time.Since(start)))
	return out, nil
}
