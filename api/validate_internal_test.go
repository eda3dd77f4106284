package api

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestIsNameMatchesPattern holds the loop that checks queue and type names
// to the regular expression it replaced.
func TestIsNameMatchesPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	cases := []string{"", "a", "default", "Q-1_x.y:z", "a b", "a/b", "é", "a\n", "\x00", "a$", "[a]",
		strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("é", 60)}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := "aZ09_.:-/ \né\x00+"
	for range 5000 {
		b := make([]byte, rng.IntN(140))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	valid := 0
	for _, s := range cases {
		if got, want := isName(s), pattern.MatchString(s); got != want {
			t.Errorf("isName(%q) = %v, the pattern says %v", s, got, want)
		}
		if isName(s) {
			valid++
		}
	}
	if valid == 0 || valid == len(cases) {
		t.Fatalf("%d of %d names valid: the cases do not tell the two apart", valid, len(cases))
	}
}

// TestCheckEnvNamesTheFirstBadVariable: the environment is checked without
// sorting its names, but the error still names the first bad one by name.
func TestCheckEnvNamesTheFirstBadVariable(t *testing.T) {
	env := map[string]string{"OK": "1", "LD_B": "x", "LD_A": "y", "Z": "z"}
	for range 20 {
		err := checkEnv(batchField(2), "env", env)
		if err == nil || !strings.Contains(err.Error(), "jobs[2].env.LD_A") {
			t.Fatalf("checkEnv: %v, want an error naming jobs[2].env.LD_A", err)
		}
	}
	if err := checkEnv(batchField(2), "env", map[string]string{"A": "1", "B": "2"}); err != nil {
		t.Fatalf("checkEnv of a good environment: %v", err)
	}
}
