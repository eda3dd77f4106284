package main

import (
	"context"
	"strings"
	"testing"

	"github.com/workron/workron/internal/testkit/syncbuf"
)

// TestVersionStampedByRelease: what scripts/release sets with -X
// (main.version, main.commit, main.modified) is what `workron version`
// prints, whatever Go's own VCS stamp says (it has none in a git worktree).
func TestVersionStampedByRelease(t *testing.T) {
	oldVersion, oldCommit, oldModified := version, commit, modified
	t.Cleanup(func() { version, commit, modified = oldVersion, oldCommit, oldModified })
	for _, tc := range []struct {
		name, modified, want string
	}{
		{"CleanTree", "", "workron v1.2.3-rc.1\ncommit:   0123456789abcdef0123456789abcdef01234567\n"},
		{"AllowDirty", "true", "workron v1.2.3-rc.1\ncommit:   0123456789abcdef0123456789abcdef01234567 (modified)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, commit, modified = "v1.2.3-rc.1", "0123456789abcdef0123456789abcdef01234567", tc.modified
			var out syncbuf.Buffer
			if err := run(context.Background(), []string{"version"}, &out, &out); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("workron version printed\n%s\nwant it to begin\n%s", out.String(), tc.want)
			}
		})
	}
}
