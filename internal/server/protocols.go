package server

import (
	"fmt"
	"net/http"

	"golang.org/x/net/http2"
)

// Protocols returns the protocols the API is served with: HTTP/1.1, and HTTP/2 with prior
// knowledge over cleartext (h2c), on the same port. A client that follows many runs at once
// (a gateway, a proxy, a Go client with an HTTP/2 transport) can then carry all their event
// streams on one connection, whose writes the server combines; HTTP/1.1 clients (browsers'
// EventSource, curl) see no difference. TLS in front of dair negotiates HTTP/2 as usual.
func Protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true) // over TLS, should a listener ever carry it
	p.SetUnencryptedHTTP2(true)
	return &p
}

// maxStreamsPerConn is the most streams one HTTP/2 connection may have open (the SETTINGS it
// advertises; net/http's default is 250). A client following more event streams than that at
// once needs more connections, and Go's client, finding its connection full, drops it from its
// pool and dials anew: connections churn. Each open stream costs its handler goroutine, as on
// as many HTTP/1.1 connections.
const maxStreamsPerConn = 1000

// ConfigureHTTP sets srv up to serve the API as dair does: over Protocols, with HTTP/2 (h2c and
// over TLS) served by golang.org/x/net/http2 with its random write scheduler and up to
// maxStreamsPerConn streams per connection. The scheduler
// of net/http's own HTTP/2 server (round-robin over every open stream) looks at each open
// stream for every frame it writes, so a connection carrying hundreds of event streams, most
// of them idle between events, pays for all of them at each event; the random scheduler keeps
// only the streams with frames waiting. Stream priorities were never honoured by either.
// ConfigureHTTP also registers the HTTP/2 server's graceful close with srv.Shutdown. Call it
// once, before srv serves; it fails only when srv's TLS configuration cannot carry HTTP/2.
func ConfigureHTTP(srv *http.Server) error {
	srv.Protocols = Protocols()
	if err := http2.ConfigureServer(srv, &http2.Server{MaxConcurrentStreams: maxStreamsPerConn, NewWriteScheduler: http2.NewRandomWriteScheduler}); err != nil {
		return fmt.Errorf("server: configure http/2: %w", err)
	}
	return nil
}
