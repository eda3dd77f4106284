package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestRunRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"sidekiq"}, `unknown command "sidekiq"`},
		{[]string{"river", "--river-fetch-cooldown", "0s"}, "--river-fetch-cooldown"},
		{[]string{"asynq", "--asynq-check-interval", "0s"}, "--asynq-check-interval"},
		{[]string{"river", "--clients", "0"}, "--clients"},
		{[]string{"river"}, "--pg"},
		{[]string{"asynq"}, "--redis"},
	} {
		err := run(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
