package main

import (
	"flag"
	"io"
	"log/slog"
	"slices"
	"testing"
)

func TestWorkerFlagsFillTheConfig(t *testing.T) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f workerFlags
	f.register(fs)
	err := fs.Parse([]string{"--pass-env", "LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES", "--pass-env", "HTTP_PROXY",
		"--allow-command", "make", "--allow-command", "/usr/bin/rsync,tar", "--run-as", "builder"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config(slog.New(slog.DiscardHandler))
	if want := []string{"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "HTTP_PROXY"}; !slices.Equal(cfg.PassEnv, want) {
		t.Errorf("PassEnv = %q, want %q", cfg.PassEnv, want)
	}
	if want := []string{"make", "/usr/bin/rsync", "tar"}; !slices.Equal(cfg.AllowCommands, want) {
		t.Errorf("AllowCommands = %q, want %q", cfg.AllowCommands, want)
	}
	if cfg.RunAs != "builder" {
		t.Errorf("RunAs = %q, want builder", cfg.RunAs)
	}
}
