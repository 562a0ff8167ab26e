package remote

import (
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// DefaultIdleTimeout is how long a request, once sent, may wait for the
// first byte of its answer before the attempt is given up (and retried):
// Options.IdleTimeout's default.
const DefaultIdleTimeout = 30 * time.Second

// stalledReadFactor times the idle timeout is how long a read on a
// connection may see no byte at all: an upload or download that stalled
// part way. It is longer, since it runs from the moment the connection
// waits for an answer, which for an upload is before its body is sent.
const stalledReadFactor = 10

// idleClient is the SDK's HTTP client with two bounds the SDK does not
// set for S3: the wait for an answer once a request is sent, and the
// time a connection may go without a byte read. A server that takes a
// connection and stops answering (stopped, hung, or behind a link that
// drops everything) would otherwise hold a request, and the command
// waiting on it, for good. Both are timeouts, which the SDK's retryer
// retries. It stays an awshttp.BuildableClient, so that the SDK can add
// the certificates of AWS_CA_BUNDLE to it.
func idleClient(timeout time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTransportOptions(func(tr *http.Transport) { tr.ResponseHeaderTimeout = timeout }).
		WithReadTimeout(stalledReadFactor * timeout)
}
