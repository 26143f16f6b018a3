package gmailtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/emersion/go-imap/v2"
)

// filter is one connection's translation (see the package documentation).
// Both directions read line by line and pass literals through untouched,
// so no message content is ever taken for a command or a response.
type filter struct {
	s *Server

	mu sync.Mutex
	// pending are the tags of the UID FETCH commands that asked for
	// Gmail's items, until their completion.
	pending map[string]bool
	// selecting is the folder an EXAMINE or SELECT in flight (tag
	// selectTag) opens, selectValidity what it reported; folder and
	// validity are the folder open.
	selecting, selectTag string
	selectValidity       uint32
	folder               string
	validity             uint32
}

// maxLine bounds a line the filter reads.
const maxLine = 1 << 20

// relay copies from r to w line by line, handing each line that starts a
// command or a response to edit, and every literal through as it is.
func relay(r io.Reader, w io.Writer, edit func(string) string) {
	br := bufio.NewReaderSize(r, 64<<10)
	continued := false
	for {
		line, err := br.ReadString('\n')
		if err != nil || len(line) > maxLine {
			return
		}
		if !continued {
			line = edit(line)
		}
		if _, err := io.WriteString(w, line); err != nil {
			return
		}
		n, ok := literal(line)
		if ok {
			if _, err := io.CopyN(w, br, n); err != nil {
				return
			}
		}
		continued = ok
	}
}

// literal reports the size of the literal a line announces at its end
// ({n}, {n+} or ~{n}).
func literal(line string) (int64, bool) {
	l := strings.TrimRight(line, "\r\n")
	if !strings.HasSuffix(l, "}") {
		return 0, false
	}
	open := strings.LastIndexByte(l, '{')
	if open < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(l[open+1:len(l)-1], "+"), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func (f *filter) clientToServer(client, server net.Conn) {
	relay(client, server, f.fromClient)
}

func (f *filter) serverToClient(server, client net.Conn) {
	relay(server, client, f.fromServer)
}

// fromClient takes Gmail's items out of a UID FETCH and notes the folder
// an EXAMINE or SELECT opens.
func (f *filter) fromClient(line string) string {
	tag, rest, ok := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
	if !ok {
		return line
	}
	upper := strings.ToUpper(rest)
	switch {
	case strings.HasPrefix(upper, "UID FETCH ") && strings.Contains(upper, "X-GM-"):
		edited, asked := stripGmailItems(rest[len("UID FETCH "):])
		if !asked {
			return line
		}
		f.mu.Lock()
		f.pending[tag] = true
		f.mu.Unlock()
		return tag + " UID FETCH " + edited + "\r\n"
	case strings.HasPrefix(upper, "EXAMINE "), strings.HasPrefix(upper, "SELECT "):
		_, arg, _ := strings.Cut(rest, " ")
		f.mu.Lock()
		f.selecting, f.selectTag, f.selectValidity = mailboxName(arg), tag, 0
		f.mu.Unlock()
	}
	return line
}

// stripGmailItems removes X-GM-MSGID, X-GM-THRID and X-GM-LABELS from
// the item list of the UID FETCH arguments args ("set (items) [mods]").
func stripGmailItems(args string) (string, bool) {
	set, rest, _ := strings.Cut(args, " ")
	if !strings.HasPrefix(rest, "(") {
		return args, false
	}
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return args, false
	}
	var kept []string
	asked := false
	for _, it := range strings.Fields(rest[1:end]) {
		if strings.HasPrefix(strings.ToUpper(it), "X-GM-") {
			asked = true
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == 0 {
		kept = []string{"UID"}
	}
	return set + " (" + strings.Join(kept, " ") + ")" + rest[end+1:], asked
}

// mailboxName reads the mailbox of EXAMINE or SELECT: a quoted string or
// an atom (what MailFathom sends), INBOX in any case as INBOX.
func mailboxName(arg string) string {
	var name string
	if strings.HasPrefix(arg, `"`) {
		var b strings.Builder
		for i := 1; i < len(arg); i++ {
			c := arg[i]
			if c == '\\' && i+1 < len(arg) {
				i++
				b.WriteByte(arg[i])
				continue
			}
			if c == '"' {
				break
			}
			b.WriteByte(c)
		}
		name = b.String()
	} else {
		name, _, _ = strings.Cut(arg, " ")
	}
	if strings.EqualFold(name, "INBOX") {
		return "INBOX"
	}
	return name
}

// fromServer rewrites capability lists, follows the folder opened, and
// adds Gmail's items to the FETCH answers of the commands that asked.
func (f *filter) fromServer(line string) string {
	if i, ok := capabilityList(line); ok {
		line = rewriteCapabilities(line, i)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(line, "* ") {
		if f.selecting != "" {
			if v, ok := codeNumber(line, "[UIDVALIDITY "); ok {
				f.selectValidity = uint32(v)
			}
		}
		if len(f.pending) > 0 {
			return f.addGmailItems(line)
		}
		return line
	}
	tag, rest, _ := strings.Cut(line, " ")
	if tag == f.selectTag && f.selectTag != "" {
		f.folder, f.validity = "", 0
		if strings.HasPrefix(strings.ToUpper(rest), "OK") {
			f.folder, f.validity = f.selecting, f.selectValidity
		}
		f.selecting, f.selectTag = "", ""
	}
	delete(f.pending, tag)
	return line
}

// capabilityList finds where a capability list starts: a CAPABILITY
// response, or a CAPABILITY response code of a status response (never
// inside the data of another response).
func capabilityList(line string) (int, bool) {
	upper := strings.ToUpper(line)
	if strings.HasPrefix(upper, "* CAPABILITY ") {
		return len("* CAPABILITY "), true
	}
	fields := strings.SplitN(upper, " ", 3)
	if len(fields) < 3 || !strings.HasPrefix(fields[2], "[CAPABILITY ") {
		return 0, false
	}
	switch fields[1] {
	case "OK", "PREAUTH", "NO", "BAD":
		return len(fields[0]) + len(fields[1]) + 2 + len("[CAPABILITY "), true
	}
	return 0, false
}

// rewriteCapabilities edits the capability list that starts at start in
// line: X-GM-EXT-1 added, COMPRESS=DEFLATE and STARTTLS left out.
func rewriteCapabilities(line string, start int) string {
	end := strings.IndexAny(line[start:], "]\r\n")
	if end < 0 {
		end = len(line) - start
	}
	var caps []string
	for _, c := range strings.Fields(line[start : start+end]) {
		switch strings.ToUpper(c) {
		case "COMPRESS=DEFLATE", "STARTTLS", "X-GM-EXT-1":
			continue
		}
		caps = append(caps, c)
	}
	caps = append(caps, "X-GM-EXT-1")
	return line[:start] + strings.Join(caps, " ") + line[start+end:]
}

// codeNumber reads the number after prefix in line.
func codeNumber(line, prefix string) (uint64, bool) {
	i := strings.Index(strings.ToUpper(line), prefix)
	if i < 0 {
		return 0, false
	}
	digits := line[i+len(prefix):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	v, err := strconv.ParseUint(digits[:n], 10, 64)
	return v, err == nil
}

// addGmailItems adds X-GM-MSGID, X-GM-THRID and X-GM-LABELS to a FETCH
// answer that carries the message's UID.
func (f *filter) addGmailItems(line string) string {
	open := strings.Index(line, " FETCH (")
	if open < 0 || f.folder == "" {
		return line
	}
	body := line[open+len(" FETCH ("):]
	uid, ok := codeNumber(" "+body, " UID ")
	if !ok {
		uid, ok = codeNumber(body, "UID ")
	}
	if !ok {
		return line
	}
	m := f.s.identify(f.folder, f.validity, imap.UID(uid))
	f.s.mu.Lock()
	labels := make([]string, len(m.labels))
	for i, l := range m.labels {
		if strings.HasPrefix(l, `\`) {
			labels[i] = l
		} else {
			labels[i] = strconv.Quote(l)
		}
	}
	f.s.mu.Unlock()
	items := fmt.Sprintf("X-GM-MSGID %d X-GM-THRID %d X-GM-LABELS (%s) ", m.MsgID, m.ThrID, strings.Join(labels, " "))
	return line[:open+len(" FETCH (")] + items + body
}
