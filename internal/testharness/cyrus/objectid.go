package cyrus

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/emersion/go-imap/v2"
)

// fetchUID and fetchEmailID find a FETCH response's UID and EMAILID, in
// whichever order the server sends them.
var (
	fetchUID     = regexp.MustCompile(`^\* \d+ FETCH \(.*\bUID (\d+)\b`)
	fetchEmailID = regexp.MustCompile(`\bEMAILID \(([^)\s]+)\)`)
)

// EmailIDs returns the EMAILID (RFC 8474 §5.1) of every message in folder,
// by UID: the server's identity of a message's content, which a copy or a
// move keeps in every folder it reaches. It sends EXAMINE and UID FETCH
// 1:* (UID EMAILID) over a session of its own, since go-imap parses no
// EMAILID. The folder name must be ASCII.
func (u *User) EmailIDs(folder string) map[imap.UID]string {
	u.t.Helper()
	ids, err := u.emailIDs(folder)
	u.Check(err, "fetch EMAILID in %q", folder)
	return ids
}

func (u *User) emailIDs(folder string) (map[imap.UID]string, error) {
	c, err := u.dialRaw()
	if err != nil {
		return nil, err
	}
	defer c.close()
	if _, err := c.command("EXAMINE " + strconv.Quote(folder)); err != nil {
		return nil, err
	}
	lines, err := c.command("UID FETCH 1:* (UID EMAILID)")
	if err != nil {
		return nil, err
	}
	ids := map[imap.UID]string{}
	for _, line := range lines {
		uid, id := fetchUID.FindStringSubmatch(line), fetchEmailID.FindStringSubmatch(line)
		if uid == nil || id == nil {
			continue
		}
		n, err := strconv.ParseUint(uid[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("UID in %q: %w", line, err)
		}
		ids[imap.UID(n)] = id[1]
	}
	return ids, nil
}
