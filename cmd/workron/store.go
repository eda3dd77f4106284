package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/workron/workron/store"
)

// runStore runs the offline verbs on a stopped node's data directory:
// `workron store compact --data DIR`.
func runStore(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "compact" {
		return errors.New("store: usage: workron store compact --data DIR (the node stopped)")
	}
	fs := flag.NewFlagSet("store compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dir string
	fs.StringVar(&dir, "data", "", "the stopped node's data directory (its --data)")
	fs.StringVar(&dir, "data-dir", "", "the same as --data")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if dir == "" || len(pos) != 0 {
		return errors.New("store compact: give the stopped node's data directory: workron store compact --data DIR")
	}
	path := filepath.Join(dir, "state.db")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store compact: %s holds no state file: %w", dir, err)
	}
	res, err := store.Compact(path)
	if err != nil {
		return fmt.Errorf("store compact: %w", err)
	}
	fmt.Fprintf(stdout, "compacted %s: %s -> %s (%s given back to the disk)\n",
		path, sizeText(res.Before), sizeText(res.After), sizeText(max(res.Before-res.After, 0)))
	return nil
}

// sizeText writes n bytes with a binary unit, e.g. 12.5 MiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
