package s3fake

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Moto is a moto_server process serving the S3 API on a loopback port.
type Moto struct {
	// URL is the endpoint (http://127.0.0.1:PORT).
	URL  string
	port int
	cmd  *exec.Cmd
	t    testing.TB
}

// StartMoto starts moto_server on a free loopback port and stops it when t
// ends. Without moto_server on PATH it skips t, unless CI is set (CI=true),
// where it fails: CI installs it.
func StartMoto(t testing.TB) *Moto {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server not found on PATH (CI installs it with pip install 'moto[server]'): %v", err)
		}
		t.Skip("moto_server not found on PATH: install it with pip install 'moto[server]' to run the object-store tests")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := &Moto{URL: fmt.Sprintf("http://127.0.0.1:%d", port), port: port, t: t}
	m.cmd = exec.Command(bin)
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// Start (re)starts the server on its port, with no objects, and waits
// until it answers.
func (m *Moto) Start() {
	m.t.Helper()
	m.cmd = exec.Command(m.cmd.Path, "-H", "127.0.0.1", "-p", fmt.Sprint(m.port))
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start moto_server: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(m.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("moto_server did not answer on %s: %v", m.URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server, as a crash does, and waits for it to exit.
func (m *Moto) Stop() {
	if m.cmd == nil || m.cmd.Process == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}

// CreateBucket creates bucket, with test credentials.
func (m *Moto) CreateBucket(bucket string) {
	m.t.Helper()
	cl := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(m.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	if _, err := cl.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		m.t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// TestEnv points the AWS SDK at the test credentials the fakes and moto
// take, region us-east-1, no shared config or credentials files, no
// instance metadata, and no CA bundle (the tests speak plain HTTP to
// loopback; Litestream's client brings its own http.Client, with which
// the SDK cannot load one), for t's duration.
func TestEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CA_BUNDLE", "")
}

// Within runs fn and returns its error, failing t if fn has not returned
// after a minute: a request the object store never answers (SetStall)
// must end, not hold the command for good.
func Within(t testing.TB, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits on an object store that stopped answering", what)
		return nil
	}
}
