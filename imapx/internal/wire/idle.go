package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ErrNotificationOverflow is the cause of a *TransportError when the server
// said, with an untagged NOTIFICATIONOVERFLOW (RFC 5465 §5.8), that it
// stopped reporting changes: the subscription is gone, so the connection
// is closed and the caller starts again from a connection of its own.
var ErrNotificationOverflow = errors.New("the server stopped its notifications (NOTIFICATIONOVERFLOW)")

// idleEvent is one response, or the failure that ended the stream, as the
// reader of an Idle delivers it.
type idleEvent struct {
	r   *Response
	err error
}

// Idle issues IDLE (RFC 2177 §3) and waits for the server to report a
// change (see Change), for renewal to elapse, or for ctx to end, whichever
// comes first, then ends the command with DONE and reads it to its tagged
// completion. It returns the folders the server reported changes in, each
// once, in the order the reports came; none when renewal elapsed quietly.
// A change reported while DONE is under way is returned too.
//
// timeout bounds the server's parts of the exchange: the continuation
// request that starts the wait, and the completion after DONE. The wait
// itself is bounded by renewal only, since a quiet folder is silent; a
// server that stopped answering is found out by the completion after the
// next DONE. RFC 2177 requires the client to end IDLE at least every 29
// minutes, which a renewal at or below that satisfies.
//
// A NO or BAD is a *CommandError and leaves the connection usable.
// Anything that ends the conversation, BYE and NOTIFICATIONOVERFLOW
// included, kills the connection and is a *TransportError; ctx ending is
// returned as its error, wrapped, and also kills the connection, since the
// server may be in the middle of answering.
//
// Idle sends nothing but IDLE and DONE, and asks for nothing: what the
// server volunteers about the open folder (EXISTS, EXPUNGE, FETCH FLAGS)
// or, under NotifySet, about another folder (STATUS) is read for which
// folder it names and dropped.
func (c *Conn) Idle(ctx context.Context, timeout, renewal time.Duration) ([]string, error) {
	const name = "IDLE"
	if !commands[name] {
		return nil, fmt.Errorf("imapx: %s is not a command this connection sends", name)
	}
	if c.sock.Broken() {
		return nil, &TransportError{Op: name, Err: ErrConnectionUnusable}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("imapx: %s: %w", name, err)
	}
	c.tags++
	tag := "R" + strconv.Itoa(c.tags)

	var changed []string
	note := func(r *Response) {
		if f, ok := c.Change(r); ok && !contains(changed, f) {
			changed = append(changed, f)
		}
	}

	wd := StartWatchdog(ctx, c.sock, timeout)
	events := make(chan idleEvent)
	readerDone := false
	fail := func(err error) ([]string, error) {
		c.sock.Kill()
		for !readerDone {
			ev := <-events
			readerDone = ev.err != nil || ev.r.Kind == RespTagged
		}
		reason := wd.Stop()
		switch {
		case ctx.Err() != nil && reason != nil:
			return nil, fmt.Errorf("imapx: %s: %w", name, ctx.Err())
		case reason != nil:
			return nil, &TransportError{Op: name, Err: ErrTimedOut}
		case c.bye && !errors.Is(err, ErrMalformedResponse):
			return nil, &TransportError{Op: name, Err: ErrServerBye, Throttle: c.byeThrottle}
		}
		return nil, &TransportError{Op: name, Err: err}
	}

	if _, err := c.rw.Write([]byte(tag + " IDLE\r\n")); err != nil {
		readerDone = true
		return fail(err)
	}
	go func() {
		for {
			r, err := c.dec.readResponse()
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			events <- idleEvent{r: r, err: err}
			if err != nil || r.Kind == RespTagged {
				return
			}
		}
	}()

	const (
		starting = iota // IDLE sent, waiting for the continuation request
		idling          // waiting for a change or the renewal
		ending          // DONE sent, waiting for the completion
	)
	phase := starting
	var renew <-chan time.Time
	endIdle := func() error {
		phase = ending
		wd.Resume()
		_, err := c.rw.Write([]byte("DONE\r\n"))
		return err
	}
	untagged := 0
	for {
		var ev idleEvent
		select {
		case ev = <-events:
		case <-renew:
			renew = nil
			if err := endIdle(); err != nil {
				return fail(err)
			}
			continue
		}
		if ev.err != nil {
			readerDone = true
			return fail(ev.err)
		}
		r := ev.r
		switch r.Kind {
		case RespTagged:
			readerDone = true
			if r.Tag != tag {
				return fail(malformed("completion of a command that was not sent"))
			}
			_ = wd.Stop()
			if r.Status != "OK" {
				return nil, &CommandError{Command: name, Status: r.Status, Code: r.Code, Throttle: c.throttleOf(r)}
			}
			return changed, nil
		case RespContinue:
			if phase != starting {
				return fail(malformed("unexpected continuation request"))
			}
			phase = idling
			wd.Pause()
			t := time.NewTimer(renewal)
			defer t.Stop()
			renew = t.C
			if len(changed) > 0 {
				// Reported before the wait began: end it at once.
				renew = nil
				if err := endIdle(); err != nil {
					return fail(err)
				}
			}
			continue
		case RespStatus:
			if r.Status == "BYE" {
				c.noteBye(r)
			}
			if r.Code == "NOTIFICATIONOVERFLOW" {
				return fail(ErrNotificationOverflow)
			}
		}
		if untagged++; untagged > c.maxUntagged {
			return fail(malformed("too many responses to one command"))
		}
		before := len(changed)
		note(r)
		if phase == idling && len(changed) > before {
			renew = nil
			if err := endIdle(); err != nil {
				return fail(err)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
