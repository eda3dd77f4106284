package connlimit_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workron/workron/internal/connlimit"
	"github.com/workron/workron/internal/testkit/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts an HTTP server on a capped listener; /slow says it entered
// on entered, then blocks until release is closed.
func serve(t *testing.T, max int, entered, release chan struct{}) (*connlimit.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := connlimit.New(ln, max)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := &http.Server{Handler: mux, ConnState: lim.ConnState, ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lim) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return lim, ln.Addr().String()
}

// dialSilent opens n connections that send nothing, and counts those the
// server closes.
func dialSilent(t *testing.T, addr string, n int, closed *atomic.Int64) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			_, _ = io.Copy(io.Discard, c) // returns when the server closes it
			closed.Add(1)
		}()
	}
}

func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection stays open, idle
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

func TestListener(t *testing.T) {
	t.Run("SilentConnectionsBeyondTheCapCloseTheOldest", func(t *testing.T) {
		lim, addr := serve(t, 50, nil, nil)
		var closed atomic.Int64
		dialSilent(t, addr, 200, &closed)
		// A minute of --read-header-timeout: only the cap closes them.
		poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
			if n := closed.Load(); n < 150 {
				return fmt.Errorf("%d of 200 silent connections closed, want 150", n)
			}
			return nil
		})
		if err := get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+addr+"/health"); err != nil {
			t.Fatalf("health with 200 silent connections: %v", err)
		}
		if n := lim.Open(); n > 50 {
			t.Fatalf("%d connections open, cap 50", n)
		}
	})

	t.Run("IdleKeepAliveConnectionsMakeRoom", func(t *testing.T) {
		lim, addr := serve(t, 2, nil, nil)
		for range 4 { // a client each: each keeps its connection idle
			client := &http.Client{Transport: &http.Transport{}}
			t.Cleanup(client.CloseIdleConnections)
			if err := get(client, "http://"+addr+"/health"); err != nil {
				t.Fatal(err)
			}
		}
		poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
			if n := lim.Open(); n != 2 {
				return fmt.Errorf("%d connections open, want the cap, 2", n)
			}
			return nil
		})
	})

	t.Run("BusyConnectionsAreNotClosedAndANewOneWaits", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		lim, addr := serve(t, 2, entered, release)
		errs := make(chan error, 3)
		for range 2 {
			go func() {
				errs <- get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+addr+"/slow")
			}()
			<-entered
		}
		if n := lim.Open(); n != 2 {
			t.Fatalf("%d connections open, want 2 busy ones", n)
		}
		go func() {
			errs <- get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+addr+"/health")
		}()
		select {
		case err := <-errs:
			t.Fatalf("a request ended while both places were busy: %v", err)
		case <-time.After(100 * time.Millisecond): // the waiting one is not answered meanwhile
		}
		close(release)
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("UnderTLSBusyConnectionsAreKnownAndClosedOnesForgotten", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lim := connlimit.New(ln, 1)
		entered, release := make(chan struct{}), make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				entered <- struct{}{}
				<-release
			}
		}))
		srv.Listener.Close()
		srv.Listener = lim // under the TLS listener, as node puts it
		srv.Config.ConnState = lim.ConnState
		srv.StartTLS()
		defer srv.Close()
		client := srv.Client()
		client.Transport.(*http.Transport).DisableKeepAlives = true
		slow := make(chan error, 1)
		go func() { slow <- get(client, srv.URL+"/slow") }()
		<-entered
		fast := make(chan error, 1)
		go func() { fast <- get(client, srv.URL+"/") }() // waits: the slow one is busy
		close(release)
		if err := <-slow; err != nil {
			t.Fatalf("the busy connection: %v", err)
		}
		if err := <-fast; err != nil {
			t.Fatalf("the waiting one: %v", err)
		}
		poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
			if n := lim.Open(); n != 0 {
				return fmt.Errorf("%d connections still counted after both closed", n)
			}
			return nil
		})
	})

	t.Run("CloseEndsAWaitingAccept", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lim := connlimit.New(ln, 1)
		first := make(chan net.Conn, 1)
		second := make(chan error, 1)
		go func() {
			c, err := lim.Accept()
			if err != nil {
				second <- err
				return
			}
			first <- c
			lim.ConnState(c, http.StateActive) // busy: no room for the next
			_, err = lim.Accept()
			second <- err
		}()
		for range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		c := <-first
		defer c.Close()
		lim.Close()
		if err := <-second; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	})
}
