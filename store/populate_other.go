//go:build !linux

package store

import (
	"errors"
	"os"
)

// osPageSize is the system's page.
var osPageSize = int64(os.Getpagesize())

// madvisePopulate is Linux's (MADV_POPULATE_READ): elsewhere bbolt's reads
// fault the pages in one by one, as before.
func madvisePopulate(uintptr, uintptr) error { return errors.ErrUnsupported }
