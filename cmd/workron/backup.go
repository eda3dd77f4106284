package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

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
	cl, err := c.sec.newClient(splitList(c.server), nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	n, err := writeFileAtomic(pos[0], func(w io.Writer) (int64, error) { return cl.Backup(ctx, w) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d bytes to %s\n", n, pos[0])
	return nil
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

// restoreOnline sends the backup to the cluster (POST /restore), failing
// over between the --server URLs as every client verb does.
func restoreOnline(ctx context.Context, c *cliFlags, file string, stdout io.Writer) error {
	info, err := store.Verify(file)
	if err != nil {
		return fmt.Errorf("restore: %s not restored, nothing was sent: %w", file, err)
	}
	cl, err := c.sec.newClient(splitList(c.server), nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	res, err := cl.Restore(ctx, f, info.Size)
	if err != nil {
		return fmt.Errorf("%s not restored: %w", file, err)
	}
	if c.output == "json" {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "restored %s into the cluster: %d jobs; its state now stands at Raft index %d (the backup's was %d)\n",
		file, res.Jobs, res.Index, res.BackupIndex)
	return nil
}

// writeFileAtomic writes path through a temporary file that write fills,
// synced and renamed into place only when write succeeded.
func writeFileAtomic(path string, write func(io.Writer) (int64, error)) (int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := write(f)
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
