package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of /proc CPU times (100 on
// every Linux architecture Go supports).
const clockTick = 100

// procStat is what the benchmark reads from /proc/<pid>/stat.
type procStat struct {
	ppid int
	// own is the process's user and system time; reaped is its waited-for
	// children's (cutime + cstime).
	own, reaped time.Duration
}

func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may contain anything.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state) of proc(5): ppid is field 4, utime..cstime 14–17.
	num := func(k int) int64 { n, _ := strconv.ParseInt(f[k-3], 10, 64); return n }
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTick }
	return procStat{
		ppid:   int(num(4)),
		own:    tick(num(14) + num(15)),
		reaped: tick(num(16) + num(17)),
	}, nil
}

// treeCPU is the CPU time spent so far by the process root and all its
// descendants, the exited ones included (a parent that waited for them has
// their time in its reaped time).
func treeCPU(root int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	stats := map[int]procStat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // gone meanwhile
		}
		stats[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	if _, ok := stats[root]; !ok {
		return 0, fmt.Errorf("process %d is not running", root)
	}
	var total time.Duration
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		total += stats[pid].own + stats[pid].reaped
		queue = append(queue, children[pid]...)
	}
	return total, nil
}

// pidFile reads the process id on the first line of path (postmaster.pid,
// Dovecot's master.pid).
func pidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// machineBusy returns the CPU time all processors spent not idle so far,
// from /proc/stat, to tell how much of a benchmark's window other work
// took.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, s := range f[1:] {
		n, _ := strconv.ParseInt(s, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTick, nil
}

// cpuMeter measures the CPU time of the parts of a benchmark between two
// points: the serve process, the PostgreSQL cluster, Dovecot, and the whole
// machine.
type cpuMeter struct {
	postmaster, dovecot int
	pg0, dovecot0, all0 time.Duration
}

func newCPUMeter(pgDataDir, dovecotDir string) (*cpuMeter, error) {
	m := &cpuMeter{}
	var err error
	if m.postmaster, err = pidFile(filepath.Join(pgDataDir, "postmaster.pid")); err != nil {
		return nil, err
	}
	if m.dovecot, err = pidFile(filepath.Join(dovecotDir, "run", "master.pid")); err != nil {
		return nil, err
	}
	if m.pg0, err = treeCPU(m.postmaster); err != nil {
		return nil, err
	}
	if m.dovecot0, err = treeCPU(m.dovecot); err != nil {
		return nil, err
	}
	if m.all0, err = machineBusy(); err != nil {
		return nil, err
	}
	return m, nil
}

// cpuUse is CPU time spent since the meter started.
type cpuUse struct {
	serve, postgres, dovecot, machine time.Duration
}

func (m *cpuMeter) read(servePID int) (cpuUse, error) {
	var u cpuUse
	var err error
	if u.serve, err = treeCPU(servePID); err != nil {
		return u, err
	}
	if u.postgres, err = treeCPU(m.postmaster); err != nil {
		return u, err
	}
	if u.dovecot, err = treeCPU(m.dovecot); err != nil {
		return u, err
	}
	if u.machine, err = machineBusy(); err != nil {
		return u, err
	}
	u.postgres -= m.pg0
	u.dovecot -= m.dovecot0
	u.machine -= m.all0
	return u, nil
}

func (u cpuUse) String() string {
	other := u.machine - u.serve - u.postgres - u.dovecot
	return fmt.Sprintf("serve %.2f s, PostgreSQL %.2f s, Dovecot %.2f s, everything else on the machine %.2f s",
		u.serve.Seconds(), u.postgres.Seconds(), u.dovecot.Seconds(), other.Seconds())
}
