package api

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// countingBody tells the test when its handler has read the first piece and
// is waiting for more.
type countingBody struct {
	io.ReadCloser
	once  sync.Once
	reads int
	wait  *sync.WaitGroup
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads == 2 {
		b.once.Do(b.wait.Done)
	}
	return b.ReadCloser.Read(p)
}

// A hundred clients with a valid key announce 8 MiB each and send a
// kilobyte: the daemon holds about what they sent, not what they announced.
// Reserving the whole Content-Length took 800 MiB here.
func TestSlowBodiesHoldWhatTheySent(t *testing.T) {
	const clients = 100
	db := storetest.Open(t, bolt.Options{})
	reg := prometheus.NewRegistry()
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"webhook": true},
		Endpoints: map[string]bool{"ops": true}}, db, nil, nil, nil)
	s, err := New(Config{APIKeys: []string{key}}, db, ing, nil, reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var waiting sync.WaitGroup
	waiting.Add(clients)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &countingBody{ReadCloser: r.Body, wait: &waiting}
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	first := make([]byte, 1024)
	for i := range first {
		first[i] = ' '
	}
	for range clients {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/deliveries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", key, 8<<20)
		if _, err := c.Write(first); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { waiting.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the handlers did not all read their first piece")
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d slow bodies hold %.1f MiB", clients, float64(held)/(1<<20))
	if limit := int64(clients) * 4 * (envelope.FirstPiece + 4096); held > limit {
		t.Fatalf("%d slow bodies that sent 1 KiB each hold %d MiB (more than %d MiB): the announced length was reserved",
			clients, held>>20, limit>>20)
	}
}
