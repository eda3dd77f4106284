package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/workron/workron/store"
)

// runBackup downloads a consistent copy of the cluster's state to FILE.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c cliFlags
	c.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("backup: give the file to write, e.g. workron backup state.bak")
	}
	hc, err := c.sec.httpClient(0)
	if err != nil {
		return err
	}
	var last error
	for _, s := range splitList(c.server) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s, "/")+"/backup", nil)
		if err != nil {
			return err
		}
		if err := c.sec.authorize(req); err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			last = fmt.Errorf("GET %s/backup: HTTP %d", s, resp.StatusCode)
			continue
		}
		n, err := writeFileAtomic(pos[0], resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d bytes to %s\n", n, pos[0])
		return nil
	}
	return fmt.Errorf("backup: no server answered: %w", last)
}

// runRestore seeds a new node's data directory from a backup; start that
// node with --bootstrap (and let others --join it) to run the restored state.
func runRestore(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "", "the new node's data directory; must not exist or be empty (required)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *dataDir == "" {
		return errors.New("restore: usage: workron restore --data DIR BACKUP-FILE")
	}
	if entries, err := os.ReadDir(*dataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("restore: %s is not empty; restore seeds a new node only", *dataDir)
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	in, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer in.Close()
	path := filepath.Join(*dataDir, "state.db")
	if _, err := writeFileAtomic(path, in); err != nil {
		return err
	}
	if err := store.PrepareRestore(path); err != nil {
		os.Remove(path)
		return fmt.Errorf("restore: %s is not a Workron backup: %w", pos[0], err)
	}
	fmt.Fprintf(stdout, "restored %s into %s; now start: workron server --bootstrap --data %s ...\n", pos[0], *dataDir, *dataDir)
	return nil
}

func writeFileAtomic(path string, r io.Reader) (int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	return n, nil
}
