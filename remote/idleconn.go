package remote

import (
	"context"
	"net"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// defaultIdleTimeout is how long a request may go without a byte moving
// on its connection, either way, before it is given up (and retried).
const defaultIdleTimeout = 30 * time.Second

// idleClient is the SDK's HTTP client with every connection wrapped in an
// idleConn. A server that takes a connection and stops answering (stopped,
// hung, or behind a link that drops everything) would otherwise hold a
// request, and the command waiting on it, for good: the SDK sets no
// timeout on S3 requests. Redirects are not followed, as the SDK's own
// client does not.
func idleClient(timeout time.Duration) *http.Client {
	tr := awshttp.NewBuildableClient().GetTransport()
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, timeout: timeout}, nil
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// idleConn fails a read or write once nothing has moved on the connection,
// either way, for timeout. Each read and write pushes the deadline of both
// on, so a long upload whose answer has not begun is not cut as long as
// its bytes go out, and neither is a long download while its bytes come
// in. The error is a timeout, which the SDK's retryer retries.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	if n > 0 {
		_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
	}
	return n, err
}
