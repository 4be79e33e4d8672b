package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/server/scope"
)

// securityFlags are serve's flags for who may read and over what: bearer
// tokens, TLS, and a separate listener for the operators' endpoints.
type securityFlags struct {
	tokenFile   string
	file        *scope.TokenFile // read by tokens, re-read by watchTokens
	tlsCert     string
	tlsKey      string
	adminListen string
}

func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.tokenFile, "auth-token-file", "", "require a bearer token from `FILE` on every endpoint but /healthz and /readyz: one token a line (# comments); a bare token may do anything (admin), one followed by its scope, rights=read,edit,feedback or admin and optionally datasets=web-*,code jobs=teamA-* name=N, that alone (403 otherwise); re-read when it changes (docs/http-api.md \"Authentication, TLS and the admin port\")")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded when the file changes")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	fs.StringVar(&f.adminListen, "admin-listen", "", "serve /metrics, /stats, /plan, /datasets with store URLs and /debug/pprof/ on this address instead of the data port")
}

// tokens reads the token file (scope.ReadTokenFile): one token a line,
// blank lines and lines starting with # ignored, each bare token admin
// as before scopes, or followed by its rights and scope. No file means
// no authentication; a file with no token is an error, since it would
// lock every client out or (worse) be read as "no authentication". The
// file read is kept for watchTokens and warnTokenFile.
func (f *securityFlags) tokens() ([]scope.Token, error) {
	if f.tokenFile == "" {
		return nil, nil
	}
	file, err := scope.ReadTokenFile(f.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file: %w", err)
	}
	f.file = file
	return file.Tokens(), nil
}

// warnTokenFile logs what the token file read at start does that is
// taken but unwise (scope.TokenFile.Warnings: a file every user of the
// machine may read). Warned, not refused: deployments started so keep
// starting.
func (f *securityFlags) warnTokenFile(log zerolog.Logger) {
	if f.file == nil {
		return
	}
	for _, w := range f.file.Warnings() {
		log.Warn().Str("file", f.tokenFile).Msg(w)
	}
}

// tokenPoll is how often brand serve looks at --auth-token-file for a
// change, as --peers-file is re-read at --peers-poll's default.
const tokenPoll = 2 * time.Second

// watchTokens re-reads the token file every tick until ctx ends and,
// when its bytes changed (through any symlink, scope.TokenFile.Reload),
// gives g the tokens it holds: a token removed from the file is refused
// within tokenPoll, without a restart. A re-read not taken (one that
// does not read or parse, holds no token, or may be caught mid-write)
// keeps the tokens in force and is logged once, never its secrets.
func (f *securityFlags) watchTokens(ctx context.Context, log zerolog.Logger, g *gateway.Gateway, every time.Duration) {
	file := f.file
	if file == nil { // tokens was not called: the gateway's are this read's
		var err error
		if file, err = scope.ReadTokenFile(f.tokenFile); err != nil {
			log.Warn().Err(err).Str("file", f.tokenFile).Msg("the token file does not load: it is not watched")
			return
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		taken, err := file.Reload(g.SetTokens)
		switch {
		case err != nil:
			log.Warn().Err(err).Str("file", f.tokenFile).Msg("the token file changed but does not load; the tokens in force are kept")
		case taken:
			log.Info().Str("file", f.tokenFile).Int("tokens", len(file.Tokens())).Msg("the token file re-read")
		}
	}
}

// wrap makes ln serve TLS when --tls-cert and --tls-key are given.
func (f *securityFlags) wrap(ln net.Listener, log zerolog.Logger) (net.Listener, error) {
	switch {
	case f.tlsCert == "" && f.tlsKey == "":
		return ln, nil
	case f.tlsCert == "" || f.tlsKey == "":
		ln.Close()
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	r, err := newCertReloader(f.tlsCert, f.tlsKey, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, r.tlsConfig()), nil
}

// warnIfOpen warns when the gateway listens beyond this machine without
// authentication: anyone who reaches the port reads the datasets.
func (f *securityFlags) warnIfOpen(addr net.Addr, authenticated bool, log zerolog.Logger) {
	tcp, ok := addr.(*net.TCPAddr)
	if authenticated || !ok || tcp.IP.IsLoopback() {
		return
	}
	log.Warn().Str("addr", addr.String()).
		Msg("serving a non-loopback address without authentication: anyone who reaches it can read the datasets; give --auth-token-file, or --listen 127.0.0.1:PORT behind a proxy that authenticates")
}

// serveAdmin serves g's admin handler on ln until ctx ends.
func serveAdmin(ctx context.Context, log zerolog.Logger, g *gateway.Gateway, ln net.Listener, maxIdle int) {
	srv := newServer(g.AdminHandler(), maxIdle)
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("admin listener stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /stats, /plan and /debug/pprof/ on the admin listener")
}
