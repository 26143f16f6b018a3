package imapx

import (
	"context"
	"errors"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// FetchBodiesThenMetadata is FetchBodies of uids with FetchMetadata of
// next pipelined behind it (RFC 9051, 5.5): both UID FETCH commands are
// sent before the first answer is read, so the server goes on to next's
// metadata as soon as it has sent the last body, and the link carries no
// round trip of silence between them. fn is called as FetchBodies calls
// it; the metadata is read after the last body. The two sets must not
// share a UID: go-imap hands each answer to the command whose set holds
// its UID.
//
// err is what FetchBodies would return; when it is not nil, meta and
// metaErr are nil and the metadata was not read. metaErr is what
// FetchMetadata would return for next, read after every body was
// delivered: the bodies stand whatever it is. With no uids it is
// FetchMetadata alone.
func (s *ReadSession) FetchBodiesThenMetadata(ctx context.Context, uids []uint32, maxBytes int64, fn func(Body) error, next []uint32) (meta []MessageMetadata, metaErr, err error) {
	if len(uids) == 0 {
		meta, metaErr = s.FetchMetadata(ctx, next)
		return meta, metaErr, nil
	}
	if len(next) == 0 {
		return nil, nil, s.FetchBodies(ctx, uids, maxBytes, fn)
	}
	if err := s.openFolder(); err != nil {
		return nil, nil, err
	}
	if maxBytes <= 0 {
		return nil, nil, errors.New("imapx: FetchBodiesThenMetadata needs a positive maxBytes")
	}
	start := time.Now()
	expungesBefore := s.expungeCount()
	var (
		r         bodyReader
		delivered bool
		answer    metadataAnswer
		metaAt    time.Time
	)
	runErr := s.run(ctx, "UID FETCH", func(c *imapclient.Client, w *wire.Watchdog) error {
		bodies := c.Fetch(uidSet(uids), bodyOptions)
		metaAt = time.Now()
		metadata := c.Fetch(uidSet(next), metadataOptions)
		// The metadata is read beside the bodies, not after them: a server
		// may answer both commands at once and complete the first only
		// after the second's answers (Dovecot does), and go-imap's reader
		// waits for whoever is to take an answer. The bodies' progress
		// alone feeds the watchdog, which stays paused while fn runs.
		collected := make(chan error, 1)
		go func() {
			var err error
			answer, err = collectMetadata(metadata, func() {}, len(next))
			collected <- err
		}()
		err := r.read(bodies, w, maxBytes, fn)
		// A connection killed or lost ends the metadata's command too; on
		// anything else its answers are read to their end, which keeps
		// the connection in step.
		metaErr := <-collected
		if err != nil {
			return err
		}
		delivered = true
		return metaErr
	})
	s.debugBodies(ctx, len(uids), r, start)
	if !delivered {
		return nil, nil, runErr
	}
	if runErr != nil {
		return nil, runErr, nil
	}
	meta, metaErr = s.settleMetadata(ctx, answer, expungesBefore, len(next), metaAt)
	return meta, metaErr, nil
}
