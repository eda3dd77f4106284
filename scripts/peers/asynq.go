package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqPeer is asynq on Redis; whether Redis fsyncs its append-only file
// before it answers is Redis's setting (appendfsync), read at the start.
type asynqPeer struct {
	f         peerFlags
	opt       asynq.RedisClientOpt
	client    *asynq.Client
	inspector *asynq.Inspector
	appendfsy string
	conf      string
}

func newAsynqPeer(ctx context.Context, f peerFlags) (*asynqPeer, error) {
	if f.redis == "" {
		return nil, errors.New("--redis: give the Redis address host:port")
	}
	rdb := redis.NewClient(&redis.Options{Addr: f.redis})
	defer rdb.Close()
	conf, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis settings: %w", err)
	}
	version, err := rdb.InfoMap(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis version: %w", err)
	}
	p := &asynqPeer{f: f, opt: asynq.RedisClientOpt{Addr: f.redis, PoolSize: f.Clients + 16}, appendfsy: conf["appendfsync"]}
	if conf["appendonly"] != "yes" {
		p.appendfsy = "off"
	}
	p.conf = fmt.Sprintf("Redis %s, appendonly %s, appendfsync %s, TaskCheckInterval %s",
		version["Server"]["redis_version"], conf["appendonly"], conf["appendfsync"], f.asynqCheck)
	p.client = asynq.NewClient(p.opt)
	p.inspector = asynq.NewInspector(p.opt)
	return p, nil
}

func (p *asynqPeer) Label() string {
	switch {
	case p.f.label != "":
		return p.f.label
	case p.appendfsy == "always":
		return "asynq (appendfsync always)"
	}
	return "asynq (appendfsync " + p.appendfsy + ")"
}

func (p *asynqPeer) Settings() string { return p.conf }

// canBatch: asynq has no batch enqueue.
func (p *asynqPeer) CanBatch() bool { return false }

func (p *asynqPeer) Close() {
	_ = p.client.Close()
	_ = p.inspector.Close()
}

func (p *asynqPeer) Insert(ctx context.Context, queue string, seqs []int64) error {
	if len(seqs) != 1 {
		return errors.New("asynq has no batch enqueue")
	}
	payload := binary.BigEndian.AppendUint64(nil, uint64(seqs[0]))
	_, err := p.client.EnqueueContext(ctx, asynq.NewTask("bench", payload), asynq.Queue(queue))
	return err
}

func (p *asynqPeer) Work(_ context.Context, queue string, workers int, started func(int64)) (func(), error) {
	srv := asynq.NewServer(p.opt, asynq.Config{
		Concurrency:       workers,
		Queues:            map[string]int{queue: 1},
		TaskCheckInterval: p.f.asynqCheck,
		LogLevel:          asynq.WarnLevel,
	})
	err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		if len(t.Payload()) == 8 {
			started(int64(binary.BigEndian.Uint64(t.Payload())))
		}
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("start asynq server: %w", err)
	}
	return srv.Shutdown, nil
}

func (p *asynqPeer) Counts(_ context.Context, queue string) (waiting, done int, err error) {
	q, err := p.inspector.GetQueueInfo(queue)
	if err != nil {
		return 0, 0, fmt.Errorf("asynq queue %s: %w", queue, err)
	}
	return q.Pending + q.Active + q.Scheduled + q.Retry + q.Aggregating, q.ProcessedTotal, nil
}
