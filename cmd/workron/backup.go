package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/raftnode"
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

// runRestore restores a backup: into a running cluster through its leader
// (--server, the default), or, for a cluster that cannot start, staged in a
// new node's data directory (--data) for that node to restore once it leads.
// Either way the file is verified first and refused, changing nothing, if it
// is not a whole backup.
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c cliFlags
	c.register(fs)
	dataDir := fs.String("data", "", "offline: stage the restore in this new node's data directory (must not exist or be empty), "+
		"then start that node with --bootstrap")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("restore: usage: workron restore [--server URL] BACKUP-FILE (into a running cluster), " +
			"or workron restore --data DIR BACKUP-FILE (a new node's data dir)")
	}
	serverSet := false
	fs.Visit(func(f *flag.Flag) { serverSet = serverSet || f.Name == "server" })
	if *dataDir != "" && serverSet {
		return errors.New("restore: give --server (a running cluster) or --data (a new node's data dir), not both")
	}
	if *dataDir != "" {
		return restoreOffline(*dataDir, pos[0], stdout)
	}
	return restoreOnline(ctx, &c, pos[0], stdout)
}

// restoreOffline stages the backup in a new node's data directory.
func restoreOffline(dataDir, file string, stdout io.Writer) error {
	info, err := raftnode.StageRestore(dataDir, file)
	if err != nil {
		return fmt.Errorf("restore: %s not restored: %w", file, err)
	}
	fmt.Fprintf(stdout, "staged %s (%d jobs) in %s; now start that node alone: workron server --bootstrap --data %s ...\n"+
		"it restores the backup once it leads; then start the other nodes with empty data directories and --join\n",
		file, info.Jobs, dataDir, dataDir)
	return nil
}

// restoreOnline sends the backup to the cluster (POST /restore), trying
// each --server in turn until one answers.
func restoreOnline(ctx context.Context, c *cliFlags, file string, stdout io.Writer) error {
	info, err := store.Verify(file)
	if err != nil {
		return fmt.Errorf("restore: %s not restored, nothing was sent: %w", file, err)
	}
	hc, err := c.sec.httpClient(0)
	if err != nil {
		return err
	}
	var last error
	for _, s := range splitList(c.server) {
		res, err := postRestore(ctx, hc, c, s, file, info.Size)
		if errors.Is(err, errTryNext) {
			last = err
			continue
		}
		if err != nil {
			return err
		}
		if c.output == "json" {
			return json.NewEncoder(stdout).Encode(res)
		}
		fmt.Fprintf(stdout, "restored %s into the cluster: %d jobs; its state now stands at Raft index %d (the backup's was %d)\n",
			file, res.Jobs, res.Index, res.BackupIndex)
		return nil
	}
	return fmt.Errorf("restore: no server answered: %w", last)
}

// errTryNext marks a failure another server may not have.
var errTryNext = errors.New("try the next server")

func postRestore(ctx context.Context, hc *http.Client, c *cliFlags, server, file string, size int64) (wire.Restore, error) {
	var res wire.Restore
	f, err := os.Open(file)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+"/restore", f)
	if err != nil {
		return res, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if err := c.sec.authorize(req); err != nil {
		return res, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return res, fmt.Errorf("%w: POST %s/restore: %w", errTryNext, server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return res, fmt.Errorf("restore: POST %s/restore: reading the reply: %w", server, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.Error
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		err := fmt.Errorf("restore: POST %s/restore: HTTP %d: %s", server, resp.StatusCode, msg)
		if resp.StatusCode == http.StatusServiceUnavailable {
			return res, fmt.Errorf("%w: %w", errTryNext, err)
		}
		return res, err
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("restore: POST %s/restore: the reply is not JSON: %w", server, err)
	}
	return res, nil
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
