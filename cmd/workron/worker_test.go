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

// TestWorkerDefaults: --cpu-millis fills the offer, and with no --server
// nor WORKRON_SERVER the worker and the client verbs try the dev node and
// then the local cluster's nodes (scripts/cluster.sh).
func TestWorkerDefaults(t *testing.T) {
	t.Setenv("WORKRON_SERVER", "")
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f workerFlags
	f.register(fs)
	if err := fs.Parse([]string{"--cpu-millis", "2500", "--memory-mb", "64"}); err != nil {
		t.Fatal(err)
	}
	cfg := f.config(slog.New(slog.DiscardHandler))
	if cfg.Resources.CPUMillis != 2500 || cfg.Resources.MemoryMB != 64 {
		t.Errorf("Resources = %+v, want 2500 CPU millis and 64 MB", cfg.Resources)
	}
	want := []string{"http://127.0.0.1:7070", "http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"}
	if !slices.Equal(cfg.Servers, want) {
		t.Errorf("Servers = %q, want %q", cfg.Servers, want)
	}
	var cf cliFlags
	cf.register(flag.NewFlagSet("jobs", flag.ContinueOnError))
	if got := splitList(cf.server); !slices.Equal(got, want) {
		t.Errorf("client verbs' servers = %q, want %q", got, want)
	}
}
