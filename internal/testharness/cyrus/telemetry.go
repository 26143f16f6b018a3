package cyrus

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// telemetryChunk matches the marker Cyrus's telemetry puts before each
// chunk it read from the client ("<time<") or wrote to it (">time>").
var telemetryChunk = regexp.MustCompile(`^([<>])(\d+)([<>])`)

// Sessions returns, for every IMAP session of u that the harness did not
// open itself, the lines its client sent after logging in, in the order the
// sessions began: Cyrus's telemetry log (configdirectory/log/<user>, one
// file per session), which records a session after authentication only, so
// no credential appears. The lines are what the server read, after TLS and
// COMPRESS are undone, CRLF removed; an APPEND's literal appears as its
// lines. A session still open shows what it sent so far.
//
// It is how a test reads what the code under test sent over TLS, where
// wiretap cannot look; Cyrus writes the log as it reads, so the lines of a
// command are there once the command was answered.
func (u *User) Sessions() [][]string {
	u.t.Helper()
	dir := filepath.Join(u.srv.in.params.telemetryDir(), u.name)
	entries, err := os.ReadDir(dir)
	u.Check(err, "read telemetry")
	type session struct {
		start int64
		name  string
		lines []string
	}
	var sessions []session
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		u.Check(err, "read telemetry")
		s := session{start: -1, name: e.Name()}
		fromClient := false
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimRight(line, "\r")
			if strings.HasPrefix(line, "---------- ") {
				continue
			}
			if m := telemetryChunk.FindStringSubmatch(line); m != nil && m[1] == m[3] {
				fromClient = m[1] == "<"
				line = line[len(m[0]):]
				if s.start < 0 {
					s.start, _ = strconv.ParseInt(m[2], 10, 64)
				}
			}
			if fromClient && line != "" {
				s.lines = append(s.lines, line)
			}
		}
		if !harnessSession(s.lines) {
			sessions = append(sessions, s)
		}
	}
	sort.SliceStable(sessions, func(i, j int) bool {
		if sessions[i].start != sessions[j].start {
			return sessions[i].start < sessions[j].start
		}
		return sessions[i].name < sessions[j].name
	})
	out := make([][]string, len(sessions))
	for i, s := range sessions {
		out[i] = s.lines
	}
	return out
}

// harnessSession reports whether lines are those of a helper or raw
// session, whose first command is the harness's ID (go-imap may ask for
// the capabilities before it).
func harnessSession(lines []string) bool {
	for _, l := range lines[:min(len(lines), 2)] {
		if strings.Contains(l, " ID ") && strings.Contains(l, `"`+helperID+`"`) {
			return true
		}
	}
	return false
}
