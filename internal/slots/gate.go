package slots

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Gate admits one process's work units to the bounds Acquire enforces
// across processes, before they touch PostgreSQL: a unit that meets a full
// bound waits in the process, and is let in the moment a unit of this
// process leaves, instead of snoozing and coming back to try again.
//
// Without it, every account whose run is due is a River job that fetches,
// takes a connection, asks pg_locks for a free slot and snoozes for a few
// seconds, over and over: with a thousand accounts due at once that
// retrying is most of what PostgreSQL and the process do, and the units
// that hold slots run slower for it.
//
// A folder-level unit (one that names an alias) of an account that has
// no slot yet is let in before an account-level unit (an account run) of
// another account: the run of a new account only adds folder work, while
// the folder unit finishes an account already started. Units waiting for
// a folder slot or an alias of an account already in do not hold back
// other accounts.
//
// The gate keeps only the accounts in it and the units waiting, so what it
// holds follows the work in flight, not the configured accounts. It does
// not replace Acquire: another process's units are not in it, so Acquire
// may still report ErrFull after Enter let a unit in.
type Gate struct {
	bounds Bounds

	mu       sync.Mutex
	accounts map[string]*gateAccount
	waiting  []*gateWaiter
	// changed is closed and replaced whenever a unit leaves.
	changed chan struct{}
}

// gateAccount is one account with units in the gate.
type gateAccount struct {
	units   int
	aliases map[string]struct{}
}

// gateWaiter is a unit waiting to enter.
type gateWaiter struct {
	account, alias string
}

// NewGate returns a gate for b. It fails when b is out of Acquire's range.
func NewGate(b Bounds) (*Gate, error) {
	if b.MaxAccounts < 1 || b.MaxFoldersPerAccount < 1 || b.MaxAccounts > 1<<16 || b.MaxFoldersPerAccount > 1<<16 {
		return nil, errors.New("slots: gate bounds out of range")
	}
	return &Gate{bounds: b, accounts: map[string]*gateAccount{}, changed: make(chan struct{})}, nil
}

// Enter lets a unit of account in, and of alias when it is not empty (an
// account run names none), once the bounds allow it, and returns the
// function that lets it out; calling it again does nothing. It waits at
// most patience, and returns ErrFull when that passes or stop is closed
// first (the caller snoozes, as for Acquire's ErrFull), and ctx's error
// when ctx ends first.
func (g *Gate) Enter(ctx context.Context, account, alias string, patience time.Duration, stop <-chan struct{}) (func(), error) {
	w := &gateWaiter{account: account, alias: alias}
	timer := time.NewTimer(patience)
	defer timer.Stop()
	g.mu.Lock()
	queued := false
	for {
		if g.admit(w) {
			if queued {
				g.dequeue(w)
			}
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { g.leave(account, alias) }) }, nil
		}
		if !queued {
			g.waiting = append(g.waiting, w)
			queued = true
		}
		changed := g.changed
		g.mu.Unlock()
		var err error
		select {
		case <-changed:
		case <-timer.C:
			err = ErrFull
		case <-stop:
			err = ErrFull
		case <-ctx.Done():
			err = ctx.Err()
		}
		g.mu.Lock()
		if err != nil {
			g.dequeue(w)
			// A waiter leaving may unblock an account run it held back.
			g.broadcast()
			g.mu.Unlock()
			return nil, err
		}
	}
}

// admit takes w in when the bounds allow it. g.mu is held.
func (g *Gate) admit(w *gateWaiter) bool {
	a := g.accounts[w.account]
	if a != nil {
		if a.units >= g.bounds.MaxFoldersPerAccount {
			return false
		}
		if _, busy := a.aliases[w.alias]; busy && w.alias != "" {
			return false
		}
	} else {
		if len(g.accounts) >= g.bounds.MaxAccounts {
			return false
		}
		if w.alias == "" && g.folderUnitNeedsSlot() {
			return false
		}
		a = &gateAccount{aliases: map[string]struct{}{}}
		g.accounts[w.account] = a
	}
	a.units++
	if w.alias != "" {
		a.aliases[w.alias] = struct{}{}
	}
	return true
}

// folderUnitNeedsSlot reports whether a folder-level unit of an account
// with no units in is waiting: it takes a free account slot before an
// account run does. g.mu is held.
func (g *Gate) folderUnitNeedsSlot() bool {
	for _, o := range g.waiting {
		if o.alias != "" && g.accounts[o.account] == nil {
			return true
		}
	}
	return false
}

func (g *Gate) dequeue(w *gateWaiter) {
	for i, o := range g.waiting {
		if o == w {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			return
		}
	}
}

// broadcast wakes every waiter to look again. g.mu is held.
func (g *Gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *Gate) leave(account, alias string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.accounts[account]
	if a == nil {
		return
	}
	a.units--
	delete(a.aliases, alias)
	if a.units <= 0 {
		delete(g.accounts, account)
	}
	g.broadcast()
}

// Waiting reports whether a unit of account waits to enter: a unit in
// the gate that could go on working on the account's mailbox gives its
// place up instead, so the account's other folders take their turn.
func (g *Gate) Waiting(account string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.waiting {
		if w.account == account {
			return true
		}
	}
	return false
}
