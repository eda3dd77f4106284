package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// benchArgs is every benchmark job's payload.
type benchArgs struct {
	Seq int64 `json:"seq"`
}

func (benchArgs) Kind() string { return "bench" }

// riverPeer is River on PostgreSQL with its default durability: each insert
// and each batch of completions is a committed (fsync'd) transaction.
type riverPeer struct {
	f      peerFlags
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx] // insert-only
	logger *slog.Logger
	conf   string
}

func newRiverPeer(ctx context.Context, f peerFlags, stderr io.Writer) (*riverPeer, error) {
	if f.pg == "" {
		return nil, fmt.Errorf("--pg: give the PostgreSQL URL")
	}
	cfg, err := pgxpool.ParseConfig(f.pg)
	if err != nil {
		return nil, fmt.Errorf("--pg: %w", err)
	}
	cfg.MaxConns = int32(f.Clients + 16) // every submitter its own connection, and the workers' producer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	p := &riverPeer{f: f, pool: pool, logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	fail := func(err error) (*riverPeer, error) { pool.Close(); return nil, err }
	var fsync, sync, version string
	if err := pool.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')").Scan(&fsync, &sync, &version); err != nil {
		return fail(fmt.Errorf("read PostgreSQL settings: %w", err))
	}
	p.conf = fmt.Sprintf("PostgreSQL %s, fsync %s, synchronous_commit %s, FetchCooldown %s", version, fsync, sync, f.riverCooldown)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fail(fmt.Errorf("river migrator: %w", err))
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(fmt.Errorf("river migrate: %w", err))
	}
	if p.client, err = p.newClient(nil, 0, nil); err != nil {
		return fail(err)
	}
	return p, nil
}

// newClient makes a River client; with a queue it works that queue with
// workers workers, calling started for each job.
func (p *riverPeer) newClient(queues map[string]river.QueueConfig, workers int, started func(int64)) (*river.Client[pgx.Tx], error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(_ context.Context, job *river.Job[benchArgs]) error {
		if started != nil {
			started(job.Args.Seq)
		}
		return nil
	}))
	c, err := river.NewClient(riverpgxv5.New(p.pool), &river.Config{
		Queues:        queues,
		Workers:       ws,
		FetchCooldown: p.f.riverCooldown,
		Logger:        p.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return c, nil
}

func (p *riverPeer) Label() string {
	if p.f.label != "" {
		return p.f.label
	}
	return "River"
}

func (p *riverPeer) Settings() string { return p.conf }
func (p *riverPeer) CanBatch() bool   { return true }
func (p *riverPeer) Close()           { p.pool.Close() }

// insert is Insert for one job and InsertManyFast (COPY FROM, River's
// fastest bulk path) for several.
func (p *riverPeer) Insert(ctx context.Context, queue string, seqs []int64) error {
	opts := &river.InsertOpts{Queue: queue}
	if len(seqs) == 1 {
		_, err := p.client.Insert(ctx, benchArgs{Seq: seqs[0]}, opts)
		return err
	}
	params := make([]river.InsertManyParams, len(seqs))
	for i, s := range seqs {
		params[i] = river.InsertManyParams{Args: benchArgs{Seq: s}, InsertOpts: opts}
	}
	n, err := p.client.InsertManyFast(ctx, params)
	if err == nil && n != len(seqs) {
		err = fmt.Errorf("InsertManyFast inserted %d of %d", n, len(seqs))
	}
	return err
}

func (p *riverPeer) Work(ctx context.Context, queue string, workers int, started func(int64)) (func(), error) {
	c, err := p.newClient(map[string]river.QueueConfig{queue: {MaxWorkers: workers}}, workers, started)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start river client: %w", err)
	}
	return func() { _ = c.Stop(context.WithoutCancel(ctx)) }, nil
}

func (p *riverPeer) Counts(ctx context.Context, queue string) (waiting, done int, err error) {
	err = p.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'completed'), count(*) FILTER (WHERE state = 'completed')
		FROM river_job WHERE queue = $1`, queue).Scan(&waiting, &done)
	if err != nil {
		return 0, 0, fmt.Errorf("count river jobs: %w", err)
	}
	return waiting, done, nil
}
