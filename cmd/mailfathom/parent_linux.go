package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopWithGoRun makes the process receive SIGTERM when it was started by
// `go run` and that parent goes away: `go run` does not pass a SIGTERM on
// to the program it built, so without this a SIGTERM to it would leave
// serve — and the embedded PostgreSQL serve started — running. Serve
// drains on that SIGTERM as on any other. (Ctrl-C reaches both processes
// from the terminal already.) A process started any other way is left as
// it is: its parent's exit means nothing about it.
func stopWithGoRun() {
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return
	}
	if os.Getppid() != ppid {
		// The parent went away before the request was in place.
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
