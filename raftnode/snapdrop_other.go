//go:build !linux

package raftnode

import "os"

// dropCached does nothing where posix_fadvise is not Linux's.
func dropCached(*os.File, int64, int64) {}
