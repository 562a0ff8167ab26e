package remote

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wsstore/wsstore/wserr"
)

// bucket is what the tier asks of an object store: write-once puts,
// (ranged) gets and listing. Keys are relative to the location's prefix.
type bucket interface {
	// put stores data at key unless an object is there already, which
	// is success too (keys name their content). It reports whether this
	// call wrote it.
	put(ctx context.Context, key string, data []byte) (bool, error)
	// replace stores data at key whatever is there (the reclaim lease,
	// renewed).
	replace(ctx context.Context, key string, data []byte) error
	// putFrom is put of the size bytes body holds from its start.
	putFrom(ctx context.Context, key string, body io.ReadSeeker, size int64) (bool, error)
	// get returns n bytes of the object at key from off; n < 0 means to
	// its end. A missing object fails with ErrMissing.
	get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// open is get as a stream, for objects not to be held whole; a
	// failure while reading is coded as get's.
	open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// list calls fn with every key under prefix after the key after
	// ("" for all), in key order, and the time the object was written
	// (zero when the store does not say).
	list(ctx context.Context, prefix, after string, fn func(key string, mod time.Time) error) error
	// sizes is list with each object's length as well as its time.
	sizes(ctx context.Context, prefix string, fn func(key string, size int64, mod time.Time) error) error
	// remove deletes the object at key; a missing one is success.
	remove(ctx context.Context, key string) error
	// removeOnce is remove in one attempt, no retry: for an object that
	// may be left (a lock, which expires).
	removeOnce(ctx context.Context, key string) error
	// present reports whether there is an object at key (a HEAD request).
	present(ctx context.Context, key string) (bool, error)
}

// maxSmallObject is the most a lock or the owner object is read to: each
// is a line of JSON of a few hundred bytes, so a larger one is not one a
// build wrote (a damaged object, or one anyone who can write to the
// bucket put there), and is not held.
const maxSmallObject = 64 << 10

// errTooLarge is readSmall's error for an object past maxSmallObject.
var errTooLarge = errors.New("larger than any object of its kind")

// readSmall returns the object at key, which is a lock or the owner
// object, when it holds at most maxSmallObject bytes; a larger one fails
// with errTooLarge, no more of it read. A missing one fails with
// ErrMissing.
func readSmall(ctx context.Context, b bucket, key string) ([]byte, error) {
	rc, err := b.open(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxSmallObject+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSmallObject {
		return nil, errTooLarge
	}
	return data, nil
}

// s3Bucket is a bucket on an S3-compatible store through aws-sdk-go-v2.
type s3Bucket struct {
	cl     *s3.Client
	loc    Location
	puts   atomic.Int64 // objects this process wrote
	exists atomic.Int64 // puts answered "already there"
}

// newS3Bucket builds the client: credentials from the environment or the
// shared AWS files (config.LoadDefaultConfig), the standard retryer with
// exponential backoff and jitter, checksums only where S3 requires them
// (S3-compatible servers differ on the newer ones).
func newS3Bucket(ctx context.Context, loc Location, opts Options) (*s3Bucket, error) {
	var lo []func(*config.LoadOptions) error
	if loc.Region != "" {
		lo = append(lo, config.WithRegion(loc.Region))
	}
	if loc.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(loc.Profile))
	}
	if opts.HTTPClient != nil {
		lo = append(lo, config.WithHTTPClient(opts.HTTPClient))
	} else {
		lo = append(lo, config.WithHTTPClient(idleClient(opts.IdleTimeout)))
	}
	lo = append(lo, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = opts.MaxAttempts
			o.MaxBackoff = opts.MaxBackoff
			o.Backoff = retry.NewExponentialJitterBackoff(opts.MaxBackoff)
			o.RateLimiter = ratelimit.None
		})
	}))
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, wserr.Wrap(wserr.InvalidOptions, "remote", loc.String(), err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Credentials != nil {
		cfg.Credentials = credentialsSource{cfg.Credentials}
	}
	cl := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
			o.UsePathStyle = true
		}
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &s3Bucket{cl: cl, loc: loc}, nil
}

// credentialsSource marks the errors of the credentials' provider, so a
// request that failed for want of credentials (none in the environment,
// the shared files or the instance's metadata) is told from an object
// store that could not be reached.
type credentialsSource struct{ p aws.CredentialsProvider }

func (c credentialsSource) Retrieve(ctx context.Context) (aws.Credentials, error) {
	v, err := c.p.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return v, &credentialsError{err}
	}
	return v, err
}

// credentialsError is an error of the credentials' provider.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// unavailable wraps a transport or server error after the retryer gave
// up: store.busy, something to retry later, never a verdict on the data.
// A request refused for what no retry changes is store.invalid_options
// instead (refused).
func unavailable(op, key string, err error) error {
	if r := refused(op, key, err); r != nil {
		return r
	}
	return fmt.Errorf("%w: %w", wserr.Wrap(wserr.Busy, op, key, err), ErrUnavailable)
}

// Refused returns store.invalid_options for a request to an object store
// that was refused, or could not be made, for a reason only the
// configuration can change: no credentials to be found, the credentials
// or their permissions (401, 403), or a bucket that does not exist; nil
// for any other error. It judges the errors of any aws-sdk-go-v2 client
// (Litestream's replica client too).
func Refused(op, key string, err error) error { return refused(op, key, err) }

func refused(op, key string, err error) error {
	var ae smithy.APIError
	var ce *credentialsError
	var se *v4.SigningError
	switch {
	case errors.As(err, &ce), errors.As(err, &se):
		return wserr.New(wserr.InvalidOptions, op, key, "no credentials for the object store (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile in AWS_PROFILE; the blob tier also takes the URL's profile=, replication does not): %v", err)
	case status(err) == http.StatusUnauthorized || status(err) == http.StatusForbidden:
		return wserr.New(wserr.InvalidOptions, op, key, "the object store refused the credentials or their permissions (check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or the profile AWS_PROFILE or the blob tier URL's profile= names): %v", err)
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket":
		return wserr.New(wserr.InvalidOptions, op, key, "the object store has no such bucket (check the tier's URL): %v", err)
	case untrusted(err):
		return wserr.New(wserr.InvalidOptions, op, key, "the object store's certificate is not trusted here (SSL_CERT_FILE names the certificates to trust): %v", err)
	}
	return nil
}

// untrusted reports whether err is a TLS certificate the client would not
// trust: a setup mistake, which trying again does not mend.
func untrusted(err error) bool {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// missing is the error of a get whose object the store does not have.
func missing(key string) error {
	return wserr.Wrap(wserr.Corrupt, "remote get", key, ErrMissing)
}

func (b *s3Bucket) put(ctx context.Context, key string, data []byte) (bool, error) {
	return b.putFrom(ctx, key, bytes.NewReader(data), int64(len(data)))
}

func (b *s3Bucket) putFrom(ctx context.Context, key string, body io.ReadSeeker, size int64) (bool, error) {
	_, err := b.cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.loc.Bucket),
		Key:           aws.String(b.loc.Prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
		IfNoneMatch:   aws.String("*"),
	})
	switch {
	case err == nil:
		b.puts.Add(1)
		return true, nil
	case status(err) == http.StatusPreconditionFailed:
		b.exists.Add(1)
		return false, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("put %s: %w", key, ctx.Err())
	}
	return false, unavailable("remote put", key, err)
}

func (b *s3Bucket) replace(ctx context.Context, key string, data []byte) error {
	_, err := b.cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.loc.Bucket),
		Key:           aws.String(b.loc.Prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	switch {
	case err == nil:
		b.puts.Add(1)
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("put %s: %w", key, ctx.Err())
	}
	return unavailable("remote put", key, err)
}

func (b *s3Bucket) get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	rc, err := b.open(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (b *s3Bucket) open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Prefix + key)}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if off > 0 || n > 0 {
		end := ""
		if n > 0 {
			end = fmt.Sprint(off + n - 1)
		}
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%s", off, end))
	}
	out, err := b.cl.GetObject(ctx, in)
	switch {
	case err == nil:
	case refused("remote get", key, err) != nil:
		return nil, refused("remote get", key, err)
	case status(err) == http.StatusNotFound:
		return nil, missing(key)
	case status(err) == http.StatusRequestedRangeNotSatisfiable:
		// The range was read from an index or a header, so the object is
		// shorter than when it was written.
		return nil, wserr.New(wserr.Corrupt, "remote get", key, "object shorter than its index says (bytes %d+%d): %v", off, n, err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("get %s: %w", key, ctx.Err())
	default:
		return nil, unavailable("remote get", key, err)
	}
	return &body{rc: out.Body, ctx: ctx, key: key}, nil
}

// body is a get's response body, its read errors coded as get's.
type body struct {
	rc  io.ReadCloser
	ctx context.Context
	key string
}

func (r *body) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	switch {
	case err == nil, err == io.EOF:
		return n, err
	case r.ctx.Err() != nil:
		return n, fmt.Errorf("get %s: %w", r.key, r.ctx.Err())
	}
	return n, unavailable("remote get", r.key, err)
}

func (r *body) Close() error { return r.rc.Close() }

func (b *s3Bucket) remove(ctx context.Context, key string) error {
	return b.delete(ctx, key)
}

func (b *s3Bucket) removeOnce(ctx context.Context, key string) error {
	return b.delete(ctx, key, func(o *s3.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) })
}

func (b *s3Bucket) delete(ctx context.Context, key string, opts ...func(*s3.Options)) error {
	_, err := b.cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Prefix + key)}, opts...)
	switch {
	case refused("remote delete", key, err) != nil:
		return refused("remote delete", key, err)
	case err == nil, status(err) == http.StatusNotFound:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("delete %s: %w", key, ctx.Err())
	}
	return unavailable("remote delete", key, err)
}

func (b *s3Bucket) present(ctx context.Context, key string) (bool, error) {
	_, err := b.cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Prefix + key)})
	switch {
	case err == nil:
		return true, nil
	case refused("remote head", key, err) != nil:
		return false, refused("remote head", key, err)
	case status(err) == http.StatusNotFound:
		return false, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("head %s: %w", key, ctx.Err())
	}
	return false, unavailable("remote head", key, err)
}

func (b *s3Bucket) list(ctx context.Context, prefix, after string, fn func(key string, mod time.Time) error) error {
	return b.listObjects(ctx, prefix, after, func(o types.Object) error {
		return fn(strings.TrimPrefix(aws.ToString(o.Key), b.loc.Prefix), aws.ToTime(o.LastModified))
	})
}

func (b *s3Bucket) sizes(ctx context.Context, prefix string, fn func(key string, size int64, mod time.Time) error) error {
	return b.listObjects(ctx, prefix, "", func(o types.Object) error {
		return fn(strings.TrimPrefix(aws.ToString(o.Key), b.loc.Prefix), aws.ToInt64(o.Size), aws.ToTime(o.LastModified))
	})
}

func (b *s3Bucket) listObjects(ctx context.Context, prefix, after string, fn func(o types.Object) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.loc.Bucket), Prefix: aws.String(b.loc.Prefix + prefix)}
	if after != "" {
		in.StartAfter = aws.String(b.loc.Prefix + after)
	}
	p := s3.NewListObjectsV2Paginator(b.cl, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("list %s: %w", prefix, ctx.Err())
			}
			return unavailable("remote list", prefix, err)
		}
		for _, o := range page.Contents {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultMaxBackoff bounds the wait between retries of one request.
const defaultMaxBackoff = 2 * time.Second

// CheckCredentials fails with store.invalid_options when the AWS
// configuration for the object store at url does not load or yields no
// credentials (environment, shared files, instance metadata), as a
// request there would: for a client of the object store other than the
// tier's own, such as Litestream's, whose errors do not say so.
func CheckCredentials(ctx context.Context, url string) error {
	loc, err := ParseURL(url)
	if err != nil {
		return err
	}
	var lo []func(*config.LoadOptions) error
	if loc.Region != "" {
		lo = append(lo, config.WithRegion(loc.Region))
	}
	if loc.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(loc.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return wserr.Wrap(wserr.InvalidOptions, "remote", loc.String(), err)
	}
	if cfg.Credentials == nil {
		return wserr.New(wserr.InvalidOptions, "remote", loc.String(), "no credentials for the object store (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return refused("remote", loc.String(), &credentialsError{err})
	}
	return nil
}
