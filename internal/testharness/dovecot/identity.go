package dovecot

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// mailUserName is the account mail processes run as when the test runs as
// root. Dovecot refuses mail access as UID 0.
const mailUserName = "nobody"

// currentIdentity decides who Dovecot's processes run as. As root: the
// Debian package's dovecot and dovenull users for internal and login
// processes (they exist wherever the package is installed) and nobody with
// its primary group for mail. Otherwise the current user for everything.
func currentIdentity() (identity, error) {
	if os.Geteuid() == 0 {
		u, err := user.Lookup(mailUserName)
		if err != nil {
			return identity{}, fmt.Errorf("look up mail user %q: %w", mailUserName, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, name := range []string{"dovecot", "dovenull"} {
			if _, err := user.Lookup(name); err != nil {
				return identity{}, fmt.Errorf("look up %q, created by the dovecot-core package: %w", name, err)
			}
		}
		return identity{
			internalUser:  "dovecot",
			internalGroup: "dovecot",
			loginUser:     "dovenull",
			mailUID:       uid,
			mailGID:       gid,
			root:          true,
		}, nil
	}
	u, err := user.Current()
	if err != nil {
		return identity{}, fmt.Errorf("look up current user: %w", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return identity{}, fmt.Errorf("look up group %s of current user: %w", u.Gid, err)
	}
	return identity{
		internalUser:  u.Username,
		internalGroup: g.Name,
		loginUser:     u.Username,
		mailUID:       os.Geteuid(),
		mailGID:       os.Getegid(),
	}, nil
}
