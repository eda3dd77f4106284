package worker

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// errNotAllowed marks a command a worker with Config.AllowCommands refuses.
var errNotAllowed = errors.New("command refused")

// shellSpecial are the characters that mean something to sh outside quotes
// (operators, expansions, globs, comments, escapes) and within double
// quotes. A worker with an allow-list refuses a command that uses them
// unquoted, so what it runs is what sh would have run.
const (
	shellSpecial       = "|&;<>()$`\\*?[#~{}!\n"
	shellSpecialQuoted = "$`\\"
)

// splitCommand splits a command into words the way sh would, for the
// commands it accepts: words are separated by spaces and tabs; '...' and
// "..." quote (and may join with unquoted text into one word); nothing is
// expanded. It refuses every other character that sh treats specially when
// unquoted (| & ; < > ( ) $ ` \ * ? [ # ~ { } ! and newline) and $ ` \
// within double quotes, naming the character and its byte offset.
func splitCommand(command string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(command); i++ {
		c := command[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '\'' || c == '"':
			end := strings.IndexByte(command[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated %c quote at byte %d", errNotAllowed, c, i)
			}
			quoted := command[i+1 : i+1+end]
			if c == '"' {
				if j := strings.IndexAny(quoted, shellSpecialQuoted); j >= 0 {
					return nil, fmt.Errorf("%w: %q within double quotes at byte %d would be expanded by a shell; use single quotes", errNotAllowed, quoted[j], i+1+j)
				}
			}
			cur.WriteString(quoted)
			inWord = true
			i += end + 1
		case strings.IndexByte(shellSpecial, c) >= 0:
			return nil, fmt.Errorf("%w: %q at byte %d needs a shell; quote it, or run the job on a worker that runs shell commands", errNotAllowed, c, i)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%w: the command has no words", errNotAllowed)
	}
	return words, nil
}

// resolveAllowed maps each program of Config.AllowCommands to the file it
// runs: an absolute path as it is, a bare name looked up in the worker's
// PATH once, here, so that a job's own PATH cannot choose another file.
func resolveAllowed(progs []string) (map[string]string, error) {
	if len(progs) == 0 {
		return nil, nil
	}
	allowed := make(map[string]string, len(progs))
	for i, p := range progs {
		switch {
		case p == "" || strings.ContainsAny(p, " \t\n\x00"):
			return nil, fmt.Errorf("worker: Config.AllowCommands[%d] must be a program name or an absolute path without spaces, got %q", i, p)
		case strings.Contains(p, "/") && !filepath.IsAbs(p):
			return nil, fmt.Errorf("worker: Config.AllowCommands[%d] must be a bare name or an absolute path, got %q", i, p)
		}
		path, err := exec.LookPath(p)
		if err != nil {
			return nil, fmt.Errorf("worker: Config.AllowCommands[%d]: %w", i, err)
		}
		if path, err = filepath.Abs(path); err != nil {
			return nil, fmt.Errorf("worker: Config.AllowCommands[%d]: %w", i, err)
		}
		allowed[p] = path
	}
	return allowed, nil
}

// allowedCommand builds the exec.Cmd for command on a worker with an
// allow-list: split into words without a shell, its first word one of the
// allowed programs exactly as listed. The error wraps errNotAllowed.
func (w *Worker) allowedCommand(command string) (*exec.Cmd, error) {
	words, err := splitCommand(command)
	if err != nil {
		return nil, err
	}
	path, ok := w.allowed[words[0]]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not one of the programs worker %s runs (%s)",
			errNotAllowed, words[0], w.cfg.ID, strings.Join(slices.Sorted(maps.Keys(w.allowed)), ", "))
	}
	cmd := exec.Command(path, words[1:]...)
	cmd.Args[0] = words[0]
	return cmd, nil
}
