package api

import "github.com/prometheus/client_golang/prometheus"

// diskCollector reads the data directory's sizes and its disk's free space
// at scrape time (disk.go).
type diskCollector struct{ s *Server }

var (
	descStoreBytes = prometheus.NewDesc("workron_store_bytes",
		"Size of this node's state file (state.db).", nil, nil)
	descStoreInUse = prometheus.NewDesc("workron_store_in_use_bytes",
		"Bytes of the state file its pages hold; the rest are free pages bbolt reuses, which `workron store compact` gives back to the disk.", nil, nil)
	descLogBytes = prometheus.NewDesc("workron_raft_log_bytes",
		"Size of this node's Raft log file (raft.db).", nil, nil)
	descSnapDirBytes = prometheus.NewDesc("workron_snapshot_dir_bytes",
		"Bytes of the files in this node's snapshot directory: the retained snapshots, and one being written.", nil, nil)
	descDiskFree = prometheus.NewDesc("workron_disk_free_bytes",
		"Free space (to an unprivileged user) on the disk of this node's data directory; absent where the system does not tell.", nil, nil)
	descDiskSize = prometheus.NewDesc("workron_disk_size_bytes",
		"Size of the disk of this node's data directory; absent where the system does not tell.", nil, nil)
	descDiskLow = prometheus.NewDesc("workron_disk_low",
		"1 while the free space on the disk of this node's data directory is under its threshold (--disk-low-free).", nil, nil)
)

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreBytes, descStoreInUse, descLogBytes, descSnapDirBytes, descDiskFree, descDiskSize, descDiskLow} {
		ch <- d
	}
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	r := c.s.readDisk()
	gauge(descStoreBytes, float64(r.usage.StateBytes))
	gauge(descStoreInUse, float64(r.usage.StateInUseBytes))
	gauge(descLogBytes, float64(r.usage.LogBytes))
	gauge(descSnapDirBytes, float64(r.usage.SnapshotBytes))
	if r.known {
		gauge(descDiskFree, float64(r.free))
		gauge(descDiskSize, float64(r.size))
	}
	gauge(descDiskLow, boolValue(r.low))
}
