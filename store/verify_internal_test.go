package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestVerifyRefusesAFormatItCannotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, putUint(currentFormat+1)) })
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Verify(path)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "state format") {
		t.Fatalf("Verify = %v, want ErrDamaged naming the state format", err)
	}
}
