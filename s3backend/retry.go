package s3backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// errKind is what a failed request means for the caller.
type errKind int

const (
	kindPermanent errKind = iota // report as is
	kindRetry                    // transient: retry, then ErrUnavailable
	kindNotFound                 // ErrNotFound
	kindChanged                  // ErrChanged (412)
	kindRange                    // ErrOutOfRange (416)
)

// retryableCode reports whether an S3 error code means "try again later"
// whatever the HTTP status says.
func retryableCode(code string) bool {
	switch code {
	case "SlowDown", "SlowDownRead", "SlowDownWrite",
		"Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled",
		"RequestTimeout", "InternalError", "ServiceUnavailable",
		"XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum",
		"ConditionalRequestConflict": // a conditional write racing another (409)
		return true
	}
	return false
}

// classify says what err, returned by a minio-go call, means.
func classify(err error) errKind {
	switch {
	case errors.Is(err, ErrNotFound):
		return kindNotFound
	case errors.Is(err, ErrChanged):
		return kindChanged
	case errors.Is(err, ErrOutOfRange):
		return kindRange
	case errors.Is(err, errStalled):
		return kindRetry
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.Code == "NoSuchKey" || resp.Code == "NoSuchBucket" || resp.StatusCode == http.StatusNotFound:
			return kindNotFound
		case resp.Code == "PreconditionFailed" || resp.StatusCode == http.StatusPreconditionFailed:
			return kindChanged
		case resp.Code == "InvalidRange" || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
			return kindRange
		case retryableCode(resp.Code):
			return kindRetry
		}
		switch resp.StatusCode {
		case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return kindRetry
		}
		return kindPermanent
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller checks its own context first; a deadline inside the
		// transport (e.g. ResponseHeaderTimeout) is a transient failure.
		return kindRetry
	}
	// A certificate problem does not heal by retrying.
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalidCert      x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalidCert) || errors.As(err, &verify) {
		return kindPermanent
	}
	var (
		netErr net.Error
		urlErr *url.Error
	)
	if errors.As(err, &netErr) || errors.As(err, &urlErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) {
		return kindRetry
	}
	return kindPermanent
}

// retrier runs one logical request with the configured retry policy.
type retrier struct {
	maxRetries int
	base       time.Duration
	// patience is how long a request the store throttles (503 SlowDown,
	// 429: throttle) is retried whatever maxRetries says, counted from
	// its first refusal (Config.ThrottlePatience); 0: throttled answers
	// count as any failure. A store that refuses GETs past its rate is
	// up and answering: with no budget, five retries at a store that
	// refused 8.8 % of the GETs passed 4 errors on to plain ranks (issue
	// 98, item 13). The retries go through the Pacer, which slows the
	// node to what the store takes.
	patience time.Duration
}

// throttle reports whether err is the store's answer that it throttles
// the request: a 429, or a 503 whose code says so (SlowDown and its
// kin), not a 503 of a store that is down (ServiceUnavailable,
// XMinioServerNotInitialized).
func throttle(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	switch resp.Code {
	case "SlowDown", "SlowDownRead", "SlowDownWrite",
		"Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
		return true
	}
	return resp.StatusCode == http.StatusTooManyRequests
}

// backoff returns the sleep before retry number n (0-based): uniformly
// random in [0, min(cap, base·2ⁿ)], the "full jitter" scheme, which spreads
// the retries of many readers hitting one throttled backend.
func (r retrier) backoff(n int) time.Duration {
	ceiling := max(maxBackoff, r.base)
	d := r.base
	for range n {
		if d >= ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	d = min(d, ceiling)
	return rand.N(d + 1)
}

// do calls attempt until it succeeds, fails with a non-retryable error, or
// the retry budget is spent. attempt reports whether it made progress
// before failing (a body cut short after some bytes); the retry that resumes
// it still counts against the budget but does not sleep, since the backend
// was answering. A throttled answer (throttle) spends no retry while the
// request has been throttled for less than r.patience, its backoff capped
// as a retry's. do returns the classified error: a bare ctx error when ctx
// ended, the last failure with kindRetry when the budget ran out, or the
// attempt's error with its kind.
func (r retrier) do(ctx context.Context, attempt func() (progressed bool, err error)) (errKind, error) {
	var throttledSince time.Time
	tries := 0 // the retries spent
	for n := 0; ; n++ {
		progressed, err := attempt()
		if err == nil {
			return 0, nil
		}
		if ctx.Err() != nil {
			return kindPermanent, ctx.Err()
		}
		kind := classify(err)
		if kind != kindRetry {
			return kind, err
		}
		patient := false
		if r.patience > 0 && throttle(err) {
			if throttledSince.IsZero() {
				throttledSince = time.Now()
			}
			patient = time.Since(throttledSince) < r.patience
		}
		if !patient {
			if tries >= r.maxRetries {
				return kindRetry, fmt.Errorf("gave up after %d attempts: %w", n+1, err)
			}
			tries++
		}
		if !progressed {
			if err := sleep(ctx, r.backoff(n)); err != nil {
				return kindPermanent, err
			}
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
