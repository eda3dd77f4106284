package memlimit

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Limit
	}{
		{"80%", Limit{Percent: 80}},
		{" 12.5% ", Limit{Percent: 12.5}},
		{"100%", Limit{Percent: 100}},
		{"off", Limit{Off: true}},
		{"none", Limit{Off: true}},
		{"4GiB", Limit{Bytes: 4 << 30}},
		{"512MiB", Limit{Bytes: 512 << 20}},
		{"1.5G", Limit{Bytes: 3 << 29}},
		{"2GB", Limit{Bytes: 2e9}},
		{"1500000000", Limit{Bytes: 1500000000}},
		{"67108864B", Limit{Bytes: MinBytes}},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "-1GiB", "-5", "0", "0%", "-10%", "150%", "NaN%", "lots", "4XB", "1MiB", "63MiB", "9999999TiB", "Inf", "1e400"} {
		if got, err := Parse(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestLimitBytes(t *testing.T) {
	for _, c := range []struct {
		l     Limit
		avail uint64
		want  int64
	}{
		{Limit{Percent: 80}, 10 << 30, 8 << 30},
		{Limit{Percent: 80}, 0, 0}, // memory unknown: no limit
		{Limit{Bytes: 1 << 30}, 10 << 30, 1 << 30},
		{Limit{Off: true}, 10 << 30, 0},
	} {
		if got := c.l.bytes(c.avail); got != c.want {
			t.Errorf("%+v.bytes(%d) = %d, want %d", c.l, c.avail, got, c.want)
		}
	}
}

// files is a fake file system for Available.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestAvailable(t *testing.T) {
	meminfo := "MemTotal:       16303728 kB\nMemFree:         1000 kB\n"
	machine := uint64(16303728) << 10
	for _, c := range []struct {
		name  string
		files map[string]string
		want  uint64
		of    string
	}{
		{"NoCgroupLimit", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/user.slice\n",
			"/sys/fs/cgroup/user.slice/memory.max": "max\n"}, machine, "machine"},
		{"CgroupV2", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/system.slice/workron.service\n",
			"/sys/fs/cgroup/system.slice/workron.service/memory.max": "2147483648\n"}, 2 << 30, "cgroup"},
		{"CgroupV2Parent", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max": "max", "/sys/fs/cgroup/a/memory.max": "1073741824"}, 1 << 30, "cgroup"},
		{"ContainerRoot", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20, "cgroup"},
		{"CgroupV1", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "4:cpu,cpuacct:/x\n3:memory:/docker/abc\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, "cgroup"},
		{"CgroupV1None", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "3:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, machine, "machine"},
		{"CgroupAboveTheMachine", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/memory.max": "99999999999999"}, machine, "machine"},
		{"NothingToRead", nil, 0, "machine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, of := Available(files(c.files))
			if got != c.want || !strings.Contains(of, c.of) {
				t.Fatalf("Available = %d (%s), want %d (%s)", got, of, c.want, c.of)
			}
		})
	}
}
